import { useRef, useState } from "react";

import { del, get, messageOf, upload } from "../api/client";
import type { Dataset } from "../api/types";
import { isAdmin } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { Field } from "../components/Field";
import { ProgressBar } from "../components/ProgressBar";
import { useUser } from "../auth";
import { formatBytes, formatTime } from "../lib/format";
import { FORM, type FieldErrors, formErrors } from "../lib/forms";
import { useLoad } from "../lib/hooks";

const FIELDS = ["name", "format", "target", "file"];

function UploadForm({ onDone }: { onDone: () => void }) {
  const [name, setName] = useState("");
  const [format, setFormat] = useState<"TABULAR" | "IMAGE_FILES">("TABULAR");
  const [target, setTarget] = useState("");
  const [file, setFile] = useState<File | null>(null);
  const [progress, setProgress] = useState<number | null>(null);
  const [errors, setErrors] = useState<FieldErrors>({});
  const fileInput = useRef<HTMLInputElement>(null);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    if (!file) {
      setErrors({ file: "choose the file to upload" });
      return;
    }
    const form = new FormData();
    form.set("name", name || file.name);
    form.set("format", format);
    if (format === "TABULAR" && target.trim()) form.set("target", target.trim());
    form.set("file", file, file.name);
    setErrors({});
    setProgress(0);
    try {
      await upload<Dataset>("/datasets", form, setProgress);
      setName("");
      setTarget("");
      setFile(null);
      if (fileInput.current) fileInput.current.value = "";
      onDone();
    } catch (e) {
      setErrors(formErrors(e, FIELDS));
    } finally {
      setProgress(null);
    }
  };

  return (
    <form className="card form" onSubmit={submit} noValidate aria-label="upload a dataset">
      <h2>Upload a dataset</h2>
      <div className="form-grid">
        <Field label="File" error={errors.file} hint="TABULAR: a CSV with a header row; IMAGE_FILES: a zip with images.csv (path,class)">
          {(props) => (
            <input
              {...props}
              ref={fileInput}
              type="file"
              accept={format === "TABULAR" ? ".csv,text/csv" : ".zip,application/zip"}
              onChange={(e) => setFile(e.target.files?.[0] ?? null)}
            />
          )}
        </Field>
        <Field label="Name" error={errors.name} hint="defaults to the file's name">
          {(props) => <input {...props} value={name} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <Field label="Format" error={errors.format}>
          {(props) => (
            <select {...props} value={format} onChange={(e) => setFormat(e.target.value as typeof format)}>
              <option value="TABULAR">TABULAR</option>
              <option value="IMAGE_FILES">IMAGE_FILES</option>
            </select>
          )}
        </Field>
        {format === "TABULAR" && (
          <Field label="Target column" error={errors.target} hint="optional; checks every other column is numeric">
            {(props) => <input {...props} value={target} onChange={(e) => setTarget(e.target.value)} />}
          </Field>
        )}
      </div>
      {progress !== null && (
        <ProgressBar
          label="Upload"
          fraction={progress}
          detail={progress < 1 ? `${Math.round(progress * 100)}%` : "checking the dataset…"}
        />
      )}
      <ErrorBox message={errors[FORM]} />
      <button type="submit" className="primary" disabled={progress !== null}>
        Upload
      </button>
    </form>
  );
}

export function Datasets() {
  const user = useUser();
  const datasets = useLoad((signal) => get<{ datasets: Dataset[] }>("/datasets", signal), "datasets");
  const [error, setError] = useState<string | null>(null);

  const remove = async (dataset: Dataset) => {
    if (!window.confirm(`Delete dataset ${dataset.name} (#${dataset.id})?`)) return;
    try {
      await del(`/datasets/${dataset.id}`);
      setError(null);
      await datasets.reload();
    } catch (e) {
      setError(messageOf(e));
    }
  };

  const rows = datasets.data?.datasets ?? [];
  return (
    <div className="page">
      <h1>Datasets</h1>
      <UploadForm onDone={datasets.reload} />
      <ErrorBox message={error ?? datasets.error} />
      <section className="card">
        <table className="table" aria-label="datasets">
          <thead>
            <tr>
              <th>#</th>
              <th>Name</th>
              <th>Format</th>
              <th className="num">Size</th>
              {isAdmin(user.role) && <th>Owner</th>}
              <th>Uploaded</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {rows.map((dataset) => (
              <tr key={dataset.id}>
                <td>{dataset.id}</td>
                <td>{dataset.name}</td>
                <td>{dataset.format}</td>
                <td className="num">{formatBytes(dataset.size)}</td>
                {isAdmin(user.role) && <td>{dataset.owner_id === user.id ? "you" : `user ${dataset.owner_id}`}</td>}
                <td>{formatTime(dataset.created_at)}</td>
                <td className="actions">
                  <button type="button" className="danger small" onClick={() => remove(dataset)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
            {!rows.length && !datasets.loading && (
              <tr>
                <td colSpan={7} className="empty">
                  No datasets yet: upload one above.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </section>
    </div>
  );
}
