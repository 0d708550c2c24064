import { NavLink, Navigate, Route, Routes } from "react-router";

import { isAdmin } from "./api/types";
import { Logo } from "./components/Logo";
import { RequireAuth, RequireRole, useAuth } from "./auth";
import { Datasets } from "./pages/Datasets";
import { InferenceJobPage } from "./pages/InferenceJobPage";
import { InferenceJobs } from "./pages/InferenceJobs";
import { JobPage } from "./pages/JobPage";
import { Models } from "./pages/Models";
import { NewTrainJob } from "./pages/NewTrainJob";
import { SignIn } from "./pages/SignIn";
import { TrainJobs } from "./pages/TrainJobs";
import { TrialPage } from "./pages/TrialPage";
import { Users } from "./pages/Users";

function Layout({ children }: { children: React.ReactNode }) {
  const { user, signOut } = useAuth();
  return (
    <div className="app">
      <header className="topbar">
        <NavLink to="/jobs" className="brand">
          <Logo /> Baobab
        </NavLink>
        <nav aria-label="main">
          <NavLink to="/jobs">Train jobs</NavLink>
          <NavLink to="/inference">Inference</NavLink>
          <NavLink to="/datasets">Datasets</NavLink>
          <NavLink to="/models">Model templates</NavLink>
          {isAdmin(user?.role) && <NavLink to="/users">Users</NavLink>}
        </nav>
        <div className="whoami">
          <span title={user?.email}>{user?.email}</span>
          <span className="role">{user?.role}</span>
          <button type="button" className="link" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main>{children}</main>
    </div>
  );
}

function Private({ children }: { children: React.ReactNode }) {
  return (
    <RequireAuth>
      <Layout>{children}</Layout>
    </RequireAuth>
  );
}

export function App() {
  return (
    <Routes>
      <Route path="/signin" element={<SignIn />} />
      <Route path="/" element={<Navigate to="/jobs" replace />} />
      <Route path="/jobs" element={<Private><TrainJobs /></Private>} />
      <Route path="/jobs/new" element={<Private><NewTrainJob /></Private>} />
      <Route path="/jobs/:app/:version" element={<Private><JobPage /></Private>} />
      <Route path="/jobs/:app/:version/trials/:trialId" element={<Private><TrialPage /></Private>} />
      <Route path="/datasets" element={<Private><Datasets /></Private>} />
      <Route path="/models" element={<Private><Models /></Private>} />
      <Route path="/inference" element={<Private><InferenceJobs /></Private>} />
      <Route path="/inference/:id" element={<Private><InferenceJobPage /></Private>} />
      <Route
        path="/users"
        element={
          <Private>
            <RequireRole roles={["SUPERADMIN", "ADMIN"]}>
              <Users />
            </RequireRole>
          </Private>
        }
      />
      <Route
        path="*"
        element={
          <Private>
            <div className="page">
              <h1>Not found</h1>
              <p>There is no page here.</p>
            </div>
          </Private>
        }
      />
    </Routes>
  );
}
