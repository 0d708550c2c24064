import { useState } from "react";

import { get, messageOf, patch, post } from "../api/client";
import type { Role, User } from "../api/types";
import { ROLES } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { Field } from "../components/Field";
import { useUser } from "../auth";
import { formatTime } from "../lib/format";
import { FORM, type FieldErrors, formErrors } from "../lib/forms";
import { useLoad } from "../lib/hooks";

function CreateUser({ onDone }: { onDone: () => void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [role, setRole] = useState<Role>("APP_DEVELOPER");
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setErrors({});
    try {
      await post<User>("/users", { email, password, role });
      setEmail("");
      setPassword("");
      onDone();
    } catch (e) {
      setErrors(formErrors(e, ["email", "password", "role"]));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="card form" onSubmit={submit} noValidate aria-label="create a user">
      <h2>Add a user</h2>
      <div className="form-grid">
        <Field label="Email" error={errors.email}>
          {(props) => <input {...props} type="email" autoComplete="off" value={email} onChange={(e) => setEmail(e.target.value)} />}
        </Field>
        <Field label="Password" error={errors.password} hint="at least 8 characters">
          {(props) => (
            <input {...props} type="password" autoComplete="new-password" value={password} onChange={(e) => setPassword(e.target.value)} />
          )}
        </Field>
        <Field label="Role" error={errors.role}>
          {(props) => (
            <select {...props} value={role} onChange={(e) => setRole(e.target.value as Role)}>
              {ROLES.map((r) => (
                <option key={r}>{r}</option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <ErrorBox message={errors[FORM]} />
      <button type="submit" className="primary" disabled={busy}>
        Add user
      </button>
    </form>
  );
}

export function Users() {
  const me = useUser();
  const users = useLoad((signal) => get<{ users: User[] }>("/users", signal), "users");
  const [error, setError] = useState<string | null>(null);

  const change = async (user: User, body: { role?: Role; banned?: boolean }) => {
    try {
      await patch<User>(`/users/${user.id}`, body);
      setError(null);
    } catch (e) {
      setError(`${user.email}: ${messageOf(e)}`);
    }
    await users.reload();
  };

  return (
    <div className="page">
      <h1>Users</h1>
      <CreateUser onDone={users.reload} />
      <ErrorBox message={error ?? users.error} />
      <section className="card">
        <table className="table" aria-label="users">
          <thead>
            <tr>
              <th>#</th>
              <th>Email</th>
              <th>Role</th>
              <th>Status</th>
              <th>Since</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {(users.data?.users ?? []).map((user) => (
              <tr key={user.id} className={user.banned ? "banned" : undefined}>
                <td>{user.id}</td>
                <td>
                  {user.email}
                  {user.id === me.id && <span className="muted"> (you)</span>}
                </td>
                <td>
                  <select
                    aria-label={`role of ${user.email}`}
                    value={user.role}
                    disabled={user.id === me.id}
                    onChange={(e) => change(user, { role: e.target.value as Role })}
                  >
                    {ROLES.map((r) => (
                      <option key={r}>{r}</option>
                    ))}
                  </select>
                </td>
                <td>{user.banned ? <span className="badge badge-bad">banned</span> : <span className="badge badge-good">active</span>}</td>
                <td>{formatTime(user.created_at)}</td>
                <td className="actions">
                  {user.id !== me.id && (
                    <button type="button" className={user.banned ? "small" : "danger small"} onClick={() => change(user, { banned: !user.banned })}>
                      {user.banned ? "Unban" : "Ban"}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </div>
  );
}
