import { useRef, useState } from "react";

import { del, download, get, messageOf, upload } from "../api/client";
import type { Model } from "../api/types";
import { canUploadModels, isAdmin } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { Field } from "../components/Field";
import { ProgressBar } from "../components/ProgressBar";
import { useUser } from "../auth";
import { formatTime } from "../lib/format";
import { FORM, type FieldErrors, formErrors, parseDependencies } from "../lib/forms";
import { useLoad } from "../lib/hooks";
import { useApiEnums } from "../lib/enums";

const FIELDS = ["file", "name", "class_name", "task", "dependencies", "access"];

export function UploadModelForm({ onDone }: { onDone: () => void }) {
  const { tasks } = useApiEnums();
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState("");
  const [className, setClassName] = useState("");
  const [task, setTask] = useState("");
  const [dependencies, setDependencies] = useState("");
  const [access, setAccess] = useState<"PRIVATE" | "PUBLIC">("PRIVATE");
  const [progress, setProgress] = useState<number | null>(null);
  const [errors, setErrors] = useState<FieldErrors>({});
  const fileInput = useRef<HTMLInputElement>(null);
  const chosenTask = task || tasks[0] || "";

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    const problems: FieldErrors = {};
    if (!file) problems.file = "choose the template's .py file";
    let parsed: Record<string, string> = {};
    try {
      parsed = parseDependencies(dependencies);
    } catch (e) {
      problems.dependencies = messageOf(e);
    }
    if (Object.keys(problems).length || !file) {
      setErrors(problems);
      return;
    }
    const form = new FormData();
    form.set("file", file, file.name);
    form.set("name", name || file.name.replace(/\.py$/, ""));
    form.set("class_name", className);
    form.set("task", chosenTask);
    form.set("dependencies", JSON.stringify(parsed));
    form.set("access", access);
    setErrors({});
    setProgress(0);
    try {
      await upload<Model>("/models", form, setProgress);
      setFile(null);
      setName("");
      setClassName("");
      setDependencies("");
      if (fileInput.current) fileInput.current.value = "";
      onDone();
    } catch (e) {
      setErrors(formErrors(e, FIELDS));
    } finally {
      setProgress(null);
    }
  };

  return (
    <form className="card form" onSubmit={submit} noValidate aria-label="upload a model template">
      <h2>Upload a model template</h2>
      <div className="form-grid">
        <Field label="Template file" error={errors.file} hint="a .py file with a class deriving from BaseModel">
          {(props) => (
            <input {...props} ref={fileInput} type="file" accept=".py,text/x-python" onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
          )}
        </Field>
        <Field label="Class name" error={errors.class_name}>
          {(props) => <input {...props} value={className} placeholder="MyModel" onChange={(e) => setClassName(e.target.value)} />}
        </Field>
        <Field label="Name" error={errors.name} hint="defaults to the file's name">
          {(props) => <input {...props} value={name} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <Field label="Task" error={errors.task}>
          {(props) => (
            <select {...props} value={chosenTask} onChange={(e) => setTask(e.target.value)}>
              {tasks.map((t) => (
                <option key={t}>{t}</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Access" error={errors.access} hint="PUBLIC templates can be trained by everyone">
          {(props) => (
            <select {...props} value={access} onChange={(e) => setAccess(e.target.value as typeof access)}>
              <option value="PRIVATE">PRIVATE</option>
              <option value="PUBLIC">PUBLIC</option>
            </select>
          )}
        </Field>
        <Field label="Dependencies" error={errors.dependencies} hint="one a line: name==version">
          {(props) => (
            <textarea {...props} rows={2} value={dependencies} placeholder="scikit-learn==1.9.1" onChange={(e) => setDependencies(e.target.value)} />
          )}
        </Field>
      </div>
      {progress !== null && (
        <ProgressBar label="Upload" fraction={progress} detail={progress < 1 ? `${Math.round(progress * 100)}%` : "loading the template to check it…"} />
      )}
      <ErrorBox message={errors[FORM]} />
      <button type="submit" className="primary" disabled={progress !== null}>
        Upload
      </button>
    </form>
  );
}

export function Models() {
  const user = useUser();
  const models = useLoad((signal) => get<{ models: Model[] }>("/models", signal), "models");
  const [error, setError] = useState<string | null>(null);

  const act = async (action: () => Promise<void>) => {
    try {
      await action();
      setError(null);
    } catch (e) {
      setError(messageOf(e));
    }
  };
  const remove = (model: Model) =>
    act(async () => {
      if (!window.confirm(`Delete model template ${model.name} (#${model.id})?`)) return;
      await del(`/models/${model.id}`);
      await models.reload();
    });

  const rows = models.data?.models ?? [];
  return (
    <div className="page">
      <h1>Model templates</h1>
      {canUploadModels(user.role) && <UploadModelForm onDone={models.reload} />}
      <ErrorBox message={error ?? models.error} />
      <section className="card">
        <table className="table" aria-label="model templates">
          <thead>
            <tr>
              <th>#</th>
              <th>Name</th>
              <th>Class</th>
              <th>Task</th>
              <th>Access</th>
              <th>Knobs</th>
              <th>Uploaded</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {rows.map((model) => (
              <tr key={model.id}>
                <td>{model.id}</td>
                <td>{model.name}</td>
                <td>
                  <code>{model.class_name}</code>
                </td>
                <td>{model.task}</td>
                <td>{model.access}</td>
                <td className="knobs">
                  {Object.entries(model.knob_config).map(([knob, spec]) => (
                    <span key={knob} className="chip" title={JSON.stringify(spec)}>
                      {knob}
                    </span>
                  ))}
                </td>
                <td>{formatTime(model.created_at)}</td>
                <td className="actions">
                  <button type="button" className="small" onClick={() => act(() => download(`/models/${model.id}/file`, `${model.name}.py`))}>
                    Download
                  </button>
                  {(model.owner_id === user.id || isAdmin(user.role)) && (
                    <button type="button" className="danger small" onClick={() => remove(model)}>
                      Delete
                    </button>
                  )}
                </td>
              </tr>
            ))}
            {!rows.length && !models.loading && (
              <tr>
                <td colSpan={8} className="empty">
                  No model templates yet.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </section>
    </div>
  );
}
