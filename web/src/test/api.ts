import { vi } from "vitest";

export interface Call {
  method: string;
  path: string;
  body: unknown;
  headers: Record<string, string>;
}

type Answer = [status: number, body?: unknown];
type Handler = (call: Call) => Answer;

/**
 * Stubs fetch with routes keyed `METHOD /path` (the path under /api/v1, query string
 * included when the key has one; without one, any query matches). Returns the calls made.
 */
export function mockApi(routes: Record<string, Answer | Handler>): Call[] {
  const calls: Call[] = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit = {}) => {
      const method = init.method ?? "GET";
      const path = url.replace(/^\/api\/v1/, "");
      const headers = (init.headers ?? {}) as Record<string, string>;
      let body: unknown = init.body;
      if (typeof body === "string") body = JSON.parse(body);
      const call = { method, path, body, headers };
      calls.push(call);
      const route = routes[`${method} ${path}`] ?? routes[`${method} ${path.split("?")[0]}`];
      if (!route) return new Response(JSON.stringify({ error: { code: "not_found", message: `no mock for ${method} ${path}`, field: null } }), { status: 404 });
      const [status, answer] = typeof route === "function" ? route(call) : route;
      return new Response(status === 204 ? null : JSON.stringify(answer ?? {}), {
        status,
        headers: { "Content-Type": "application/json" },
      });
    }),
  );
  return calls;
}

export function apiError(status: number, message: string, field: string | null = null): Answer {
  return [status, { error: { code: "bad_request", message, field } }];
}

export const admin = { id: 1, email: "root@example.com", role: "SUPERADMIN", banned: false, created_at: "2030-01-01T00:00:00+00:00" } as const;

/** Signs `user` in as the app does (localStorage), before the app renders. */
export function signInAs(user: { id: number; email: string; role: string }): void {
  localStorage.setItem(
    "baobab.session",
    JSON.stringify({ token: "token-1", user: { banned: false, created_at: "2030-01-01T00:00:00+00:00", ...user }, expiresAt: Date.now() + 3600_000 }),
  );
}
