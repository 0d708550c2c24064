import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter } from "react-router";
import { describe, expect, it } from "vitest";

import { App } from "./App";
import { AuthProvider } from "./auth";
import { admin, apiError, mockApi, signInAs } from "./test/api";

function renderAt(path: string) {
  render(
    <MemoryRouter initialEntries={[path]}>
      <AuthProvider>
        <App />
      </AuthProvider>
    </MemoryRouter>,
  );
}

const EMPTY = {
  "GET /train_jobs": [200, { train_jobs: [] }] as [number, unknown],
  "GET /users": [200, { users: [admin] }] as [number, unknown],
  "GET /models": [200, { models: [] }] as [number, unknown],
};

describe("App", () => {
  it("sends a visitor to sign in, and back to the page they asked for", async () => {
    const calls = mockApi({
      ...EMPTY,
      "POST /tokens": [201, { token: "t", expires_in: 3600, user: admin }],
    });
    renderAt("/users");
    const user = userEvent.setup();
    await user.type(screen.getByLabelText("Email"), "root@example.com");
    await user.type(screen.getByLabelText("Password"), "root-password");
    await user.click(screen.getByRole("button", { name: "Sign in" }));
    expect(await screen.findByRole("heading", { name: "Users" })).toBeInTheDocument();
    expect(calls[0].body).toEqual({ email: "root@example.com", password: "root-password" });
    // The heading renders before the page's first fetch leaves, so wait for that fetch.
    const usersCall = await waitFor(() => {
      const call = calls.find((c) => c.path === "/users");
      if (!call) throw new Error("no GET /users yet");
      return call;
    });
    expect(usersCall.headers.Authorization).toBe("Bearer t");
  });

  it("shows a wrong password beside nothing but the form", async () => {
    mockApi({ "POST /tokens": apiError(401, "wrong email or password") });
    renderAt("/signin");
    const user = userEvent.setup();
    await user.type(screen.getByLabelText("Email"), "a@b.c");
    await user.type(screen.getByLabelText("Password"), "nope");
    await user.click(screen.getByRole("button", { name: "Sign in" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("wrong email or password");
  });

  it("keeps the users page from an APP_DEVELOPER, and the template upload too", async () => {
    const calls = mockApi(EMPTY);
    signInAs({ id: 2, email: "dev@example.com", role: "APP_DEVELOPER" });
    renderAt("/users");
    expect(await screen.findByRole("heading", { name: "Not allowed" })).toBeInTheDocument();
    expect(screen.queryByRole("link", { name: "Users" })).not.toBeInTheDocument();
    expect(calls.some((c) => c.path === "/users")).toBe(false);

    await userEvent.setup().click(screen.getByRole("link", { name: "Model templates" }));
    expect(await screen.findByRole("heading", { name: "Model templates" })).toBeInTheDocument();
    expect(screen.queryByRole("form", { name: "upload a model template" })).not.toBeInTheDocument();
  });

  it("shows admins the users page and the template upload", async () => {
    mockApi(EMPTY);
    signInAs(admin);
    renderAt("/models");
    expect(await screen.findByRole("form", { name: "upload a model template" })).toBeInTheDocument();
    expect(screen.getByRole("link", { name: "Users" })).toBeInTheDocument();
  });

  it("signs out when the API says the token no longer holds", async () => {
    mockApi({ "GET /train_jobs": apiError(401, "user 'dev@example.com' is banned") });
    signInAs({ id: 2, email: "dev@example.com", role: "APP_DEVELOPER" });
    renderAt("/jobs");
    expect(await screen.findByRole("button", { name: "Sign in" })).toBeInTheDocument();
    expect(screen.getByText(/Your session has ended/)).toBeInTheDocument();
    expect(localStorage.getItem("baobab.session")).toBeNull();
  });
});
