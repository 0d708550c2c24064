import { useState } from "react";
import { Navigate, useSearchParams } from "react-router";

import { Logo } from "../components/Logo";
import { ErrorBox } from "../components/ErrorBox";
import { Field } from "../components/Field";
import { useAuth } from "../auth";
import { FORM, type FieldErrors, formErrors } from "../lib/forms";

export function SignIn() {
  const { user, notice, signIn } = useAuth();
  const [params] = useSearchParams();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);

  const next = params.get("next");
  if (user) return <Navigate to={next && next.startsWith("/") && !next.startsWith("//") ? next : "/jobs"} replace />;

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setErrors({});
    try {
      await signIn(email, password);
    } catch (e) {
      setErrors(formErrors(e, ["email", "password"]));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="signin">
      <form className="card signin-card" onSubmit={submit} noValidate>
        <h1>
          <Logo size={28} /> Baobab
        </h1>
        <p className="muted">Sign in to create, watch and serve train jobs.</p>
        {notice && <p className="notice">{notice}</p>}
        <Field label="Email" error={errors.email}>
          {(props) => (
            <input {...props} type="email" autoComplete="username" value={email} onChange={(e) => setEmail(e.target.value)} />
          )}
        </Field>
        <Field label="Password" error={errors.password}>
          {(props) => (
            <input
              {...props}
              type="password"
              autoComplete="current-password"
              value={password}
              onChange={(e) => setPassword(e.target.value)}
            />
          )}
        </Field>
        <ErrorBox message={errors[FORM]} />
        <button type="submit" className="primary" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </div>
  );
}
