import { useState } from "react";

import { ApiError, get, messageOf, post, put } from "../api/client";
import type { InferenceVersion, InferenceVersions as Versions, VersionSpec } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { Field } from "../components/Field";
import { formatScore } from "../lib/format";
import { FORM, type FieldErrors, FieldError, fieldFor, formErrors, typedNumber } from "../lib/forms";
import { usePolling } from "../lib/hooks";

/** How often the versions are read while a rollout is on: the predictor checks the wanted revision every second. */
const ROLLOUT_POLL_MS = 1000;
const CANARY_FIELDS = ["name", "trial_ids", "weight"];
const DEFAULT_CANARY_PERCENT = 10;

/** A share as a percentage: 0.1 → "10%", 1/3 → "33.3%". */
function percent(share: number): string {
  return `${+(share * 100).toPrecision(3)}%`;
}

/** Versions as a line: `v1 90%, v2 10%`. */
function describe(versions: InferenceVersion[]): string {
  return versions.map((version) => `${version.name} ${percent(version.share)}`).join(", ");
}

/** The predictor is still switching to the wanted revision (and has not given up on it). */
function rollingOut(doc: Versions): boolean {
  return !doc.converged && !doc.error && (doc.status === "RUNNING" || doc.status === "STARTING");
}

/** Trial ids as typed (`12, 13` or `12 13`); what is not a whole number goes as typed, for the API to name. */
function typedTrialIds(text: string): unknown[] {
  return text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((token) => (/^\d+$/.test(token) ? Number(token) : token));
}

/** What the predictor serves now, against what is wanted. */
function ServedState({ doc }: { doc: Versions }) {
  const served = doc.served_revision;
  const attributes = {
    "data-testid": "versions-served",
    "data-revision": doc.revision,
    "data-served": served ?? "",
    "data-converged": doc.converged,
  };
  if (doc.converged) {
    return (
      <p className="muted small" {...attributes}>
        The predictor serves revision {served}, as wanted.
      </p>
    );
  }
  const now =
    served === null ? "The predictor serves nothing yet." : `It serves revision ${served} (${describe(doc.served_versions ?? [])}).`;
  if (doc.error) {
    return (
      <div className="error-box" role="alert" {...attributes}>
        Revision {doc.revision} cannot be served: {doc.error}. {now}
      </div>
    );
  }
  return (
    <p className="notice small" role="status" {...attributes}>
      Rolling out revision {doc.revision}: the predictor loads and warms its new versions before they get a request. {now}
    </p>
  );
}

interface TableProps {
  doc: Versions;
  editable: boolean;
  busy: boolean;
  act: (what: () => Promise<Versions>) => Promise<unknown>;
}

/** The wanted versions with a weight slider each; Apply sends the new weights, members unchanged. */
function VersionsTable({ doc, editable, busy, act }: TableProps) {
  const initial = () => Object.fromEntries(doc.versions.map((version) => [version.name, Math.round(version.share * 100)]));
  const [weights, setWeights] = useState<Record<string, number>>(initial);
  const [errors, setErrors] = useState<FieldErrors>({});
  const fields = doc.versions.map((_, index) => `versions[${index}].weight`);
  const total = Object.values(weights).reduce((sum, weight) => sum + weight, 0);
  const start = initial();
  const changed = doc.versions.some((version) => weights[version.name] !== start[version.name]);

  const apply = async (event: React.FormEvent) => {
    event.preventDefault();
    const versions: VersionSpec[] = doc.versions.map((version) => ({
      name: version.name,
      trial_ids: version.trial_ids,
      weight: weights[version.name],
    }));
    setErrors({});
    const failure = await act(() => put<Versions>(`/inference_jobs/${doc.inference_job_id}/versions`, { versions }));
    if (failure !== undefined) setErrors(formErrors(failure, fields));
  };

  const promote = async (name: string) => {
    const others = doc.versions.filter((version) => version.name !== name).map((version) => version.name);
    if (!window.confirm(`Give ${name} all the requests? ${others.join(", ")} will no longer be served.`)) return;
    setErrors({});
    const path = `/inference_jobs/${doc.inference_job_id}/versions/${encodeURIComponent(name)}/promote`;
    const failure = await act(() => post<Versions>(path));
    if (failure !== undefined) setErrors({ [FORM]: messageOf(failure) });
  };

  return (
    <form onSubmit={apply} noValidate aria-label="version weights">
      <table className="table compact" aria-label="versions">
        <thead>
          <tr>
            <th>Version</th>
            <th>Trials</th>
            <th>Weight</th>
            <th className="num">Share</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {doc.versions.map((version, index) => (
            <tr key={version.name} data-testid={`version-${version.name}`}>
              <td>
                <strong>{version.name}</strong>
              </td>
              <td>
                {version.members.map((member) => (
                  <span key={member.trial_id} className="chip" title={`score ${formatScore(member.score)}`}>
                    #{member.trial_id} {member.model_name}
                  </span>
                ))}
              </td>
              <td>
                {editable ? (
                  <Field label={`Weight of ${version.name}`} error={errors[fields[index]]}>
                    {(props) => (
                      <input
                        {...props}
                        type="range"
                        min={0}
                        max={100}
                        step={1}
                        value={weights[version.name]}
                        onChange={(e) => setWeights({ ...weights, [version.name]: Number(e.target.value) })}
                      />
                    )}
                  </Field>
                ) : (
                  version.weight
                )}
              </td>
              <td className="num" data-testid={`share-${version.name}`}>
                {editable && changed ? (total > 0 ? percent(weights[version.name] / total) : "—") : percent(version.share)}
              </td>
              <td className="actions">
                {editable && doc.versions.length > 1 && (
                  <button type="button" className="small" disabled={busy} onClick={() => promote(version.name)}>
                    Promote {version.name}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {editable && (
        <>
          <ErrorBox message={errors[FORM]} />
          <p>
            <button type="submit" className="primary" disabled={busy || !changed}>
              Apply weights
            </button>{" "}
            {changed && (
              <button type="button" disabled={busy} onClick={() => setWeights(initial())}>
                Reset
              </button>
            )}{" "}
            <span className="muted small">weights are relative: each version gets weight / sum of the weights of the requests</span>
          </p>
        </>
      )}
    </form>
  );
}

/** Adds a version with a share of the requests; the others keep their shares of the rest. */
function CanaryForm({ doc, busy, act }: Omit<TableProps, "editable">) {
  const taken = new Set(doc.versions.map((version) => version.name));
  let next = doc.versions.length + 1;
  while (taken.has(`v${next}`)) next += 1;
  const [name, setName] = useState(`v${next}`);
  const [trialIds, setTrialIds] = useState("");
  const [share, setShare] = useState(String(DEFAULT_CANARY_PERCENT));
  const [errors, setErrors] = useState<FieldErrors>({});
  const index = doc.versions.length;

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    const percentage = typedNumber(share) ?? DEFAULT_CANARY_PERCENT;
    if (typeof percentage !== "number" || percentage < 0 || percentage > 100) {
      setErrors(formErrors(new FieldError("weight", "the share of the requests must be between 0 and 100 (%)"), CANARY_FIELDS));
      return;
    }
    const versions: VersionSpec[] = [
      ...doc.versions.map((version) => ({ name: version.name, trial_ids: version.trial_ids, weight: version.share * (100 - percentage) })),
      { name: name.trim(), trial_ids: typedTrialIds(trialIds), weight: percentage },
    ];
    setErrors({});
    const failure = await act(() => put<Versions>(`/inference_jobs/${doc.inference_job_id}/versions`, { versions }));
    if (failure === undefined) {
      setTrialIds("");
      return;
    }
    // The API names the new version's fields as versions[<its index>].<field>.
    const prefix = `versions[${index}].`;
    if (failure instanceof ApiError && failure.field?.startsWith(prefix)) {
      setErrors({ [fieldFor(failure.field.slice(prefix.length), CANARY_FIELDS) ?? FORM]: failure.message });
    } else {
      setErrors(formErrors(failure, []));
    }
  };

  return (
    <form className="form" onSubmit={submit} noValidate aria-label="add a version">
      <h3>Add a version (canary)</h3>
      <div className="form-grid">
        <Field label="Version name" error={errors.name}>
          {(props) => <input {...props} value={name} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <Field label="Trial ids" error={errors.trial_ids} hint="trained trials of any train job of this app and task, e.g. 12, 13">
          {(props) => <input {...props} value={trialIds} onChange={(e) => setTrialIds(e.target.value)} className="mono" />}
        </Field>
        <Field label="Share of the requests (%)" error={errors.weight} hint="the other versions keep their shares of the rest">
          {(props) => <input {...props} type="number" min={0} max={100} value={share} onChange={(e) => setShare(e.target.value)} />}
        </Field>
      </div>
      <ErrorBox message={errors[FORM]} />
      <button type="submit" disabled={busy}>
        Add version
      </button>
    </form>
  );
}

/**
 * The versions an inference job wants served and the ones its predictor serves, with the
 * controls that change them: weights, a canary, promote and rollback. Each change is a new
 * revision; the versions are read every second until the predictor serves it.
 */
export function InferenceVersions({ jobId, active }: { jobId: number; active: boolean }) {
  const [doc, setDoc] = useState<Versions | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  usePolling(
    async (signal) => {
      try {
        setDoc(await get<Versions>(`/inference_jobs/${jobId}/versions`, signal));
        setLoadError(null);
      } catch (e) {
        if (!signal.aborted) setLoadError(messageOf(e));
        throw e;
      }
    },
    ROLLOUT_POLL_MS,
    doc === null ? loadError === null : rollingOut(doc),
  );

  /** Runs one change; the new versions on success, else the error (returned for a form to place). */
  const act = async (what: () => Promise<Versions>): Promise<unknown> => {
    setBusy(true);
    setActionError(null);
    try {
      setDoc(await what());
      return undefined;
    } catch (e) {
      return e;
    } finally {
      setBusy(false);
    }
  };

  const rollback = async () => {
    if (!doc || doc.rollback_to === null) return;
    if (!window.confirm(`Go back to the versions of revision ${doc.rollback_to}?`)) return;
    const failure = await act(() => post<Versions>(`/inference_jobs/${jobId}/rollback`));
    if (failure !== undefined) setActionError(messageOf(failure));
  };

  return (
    <section className="card" aria-label="versions">
      <div className="table-header">
        <h2>Versions</h2>
        {doc && <span className="muted small">revision {doc.revision}</span>}
        <span className="spacer" />
        {active && doc && doc.rollback_to !== null && (
          <button type="button" className="danger" disabled={busy} onClick={rollback}>
            Roll back to revision {doc.rollback_to}
          </button>
        )}
      </div>
      <ErrorBox message={loadError} />
      <ErrorBox message={actionError} />
      {doc ? (
        <>
          <ServedState doc={doc} />
          <VersionsTable key={doc.revision} doc={doc} editable={active} busy={busy} act={act} />
          {active && <CanaryForm key={`canary-${doc.revision}`} doc={doc} busy={busy} act={act} />}
        </>
      ) : (
        !loadError && <p className="muted">Loading…</p>
      )}
    </section>
  );
}
