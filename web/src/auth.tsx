import { createContext, useCallback, useContext, useEffect, useMemo, useState } from "react";
import { Navigate, useLocation } from "react-router";

import { configureSession, post } from "./api/client";
import type { Role, User } from "./api/types";

const STORAGE_KEY = "baobab.session";

interface Stored {
  token: string;
  user: User;
  expiresAt: number;
}

interface Auth {
  user: User | null;
  /** Set when the last session ended by itself (expired token, banned user). */
  notice: string | null;
  signIn: (email: string, password: string) => Promise<void>;
  signOut: () => void;
}

const AuthContext = createContext<Auth | null>(null);

function load(): Stored | null {
  try {
    const stored = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "null") as Stored | null;
    return stored && stored.expiresAt > Date.now() ? stored : null;
  } catch {
    return null;
  }
}

let onExpired: () => void = () => undefined;
// Set up before any page renders: effects run children first, so a page's first request
// may leave before the provider's own effect has run.
configureSession({ token: () => load()?.token ?? null, expired: () => onExpired() });

/** The signed-in user and their token, kept in localStorage so that a reload stays signed in. */
export function AuthProvider({ children }: { children: React.ReactNode }) {
  const [stored, setStored] = useState<Stored | null>(load);
  const [notice, setNotice] = useState<string | null>(null);

  const signOut = useCallback(() => {
    localStorage.removeItem(STORAGE_KEY);
    setStored(null);
  }, []);

  useEffect(() => {
    onExpired = () => {
      setNotice("Your session has ended (it expired, or your account changed); please sign in again.");
      signOut();
    };
  }, [signOut]);

  const signIn = useCallback(async (email: string, password: string) => {
    const answer = await post<{ token: string; expires_in: number; user: User }>("/tokens", { email, password });
    const next = { token: answer.token, user: answer.user, expiresAt: Date.now() + answer.expires_in * 1000 };
    localStorage.setItem(STORAGE_KEY, JSON.stringify(next));
    setNotice(null);
    setStored(next);
  }, []);

  const value = useMemo(() => ({ user: stored?.user ?? null, notice, signIn, signOut }), [stored, notice, signIn, signOut]);
  return <AuthContext.Provider value={value}>{children}</AuthContext.Provider>;
}

export function useAuth(): Auth {
  const auth = useContext(AuthContext);
  if (!auth) throw new Error("useAuth outside AuthProvider");
  return auth;
}

/** The signed-in user (pages below RequireAuth only). */
export function useUser(): User {
  const { user } = useAuth();
  if (!user) throw new Error("useUser outside RequireAuth");
  return user;
}

/** Sends a visitor who is not signed in to the sign-in page, and back here afterwards. */
export function RequireAuth({ children }: { children: React.ReactNode }) {
  const { user } = useAuth();
  const location = useLocation();
  if (!user) return <Navigate to={`/signin?next=${encodeURIComponent(location.pathname + location.search)}`} replace />;
  return <>{children}</>;
}

/** A page only some roles may see; the others get a message (the API refuses them anyway). */
export function RequireRole({ roles, children }: { roles: Role[]; children: React.ReactNode }) {
  const { user } = useAuth();
  if (!user || !roles.includes(user.role)) {
    return (
      <div className="page">
        <h1>Not allowed</h1>
        <p role="alert" className="error-box">
          This page needs the role {roles.join(" or ")}; you are signed in as {user?.role ?? "nobody"}.
        </p>
      </div>
    );
  }
  return <>{children}</>;
}
