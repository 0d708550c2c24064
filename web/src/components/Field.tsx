import { useId } from "react";

interface Props {
  label: string;
  error?: string;
  hint?: string;
  /** Renders the control with the id and aria attributes that tie it to its label and error. */
  children: (props: { id: string; "aria-invalid": boolean; "aria-describedby"?: string }) => React.ReactNode;
}

/** A form field: label, control, and the API's error for it right beside the control. */
export function Field({ label, error, hint, children }: Props) {
  const id = useId();
  const errorId = `${id}-error`;
  const hintId = `${id}-hint`;
  const describedBy = [error ? errorId : null, hint ? hintId : null].filter(Boolean).join(" ") || undefined;
  return (
    <div className={`field${error ? " field-invalid" : ""}`}>
      <label htmlFor={id}>{label}</label>
      {children({ id, "aria-invalid": Boolean(error), "aria-describedby": describedBy })}
      {hint && !error && (
        <div id={hintId} className="hint">
          {hint}
        </div>
      )}
      {error && (
        <div id={errorId} className="field-error" role="alert">
          {error.includes("\n") ? <pre>{error}</pre> : error}
        </div>
      )}
    </div>
  );
}
