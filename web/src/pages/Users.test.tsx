import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter } from "react-router";
import { describe, expect, it } from "vitest";

import { AuthProvider } from "../auth";
import { admin, apiError, mockApi, signInAs } from "../test/api";
import { Users } from "./Users";

const DEV = { id: 2, email: "dev@example.com", role: "APP_DEVELOPER", banned: false, created_at: "2030-01-01T00:00:00+00:00" };

function renderPage() {
  signInAs(admin);
  render(
    <MemoryRouter>
      <AuthProvider>
        <Users />
      </AuthProvider>
    </MemoryRouter>,
  );
}

describe("Users", () => {
  it("changes a role and bans, and keeps the admin from doing either to themself", async () => {
    let dev = { ...DEV };
    const calls = mockApi({
      "GET /users": () => [200, { users: [admin, dev] }],
      "PATCH /users/2": (call) => {
        dev = { ...dev, ...(call.body as object) };
        return [200, dev];
      },
    });
    renderPage();
    const user = userEvent.setup();
    const table = await screen.findByRole("table", { name: "users" });
    const [, me, other] = await waitFor(() => {
      const rows = within(table).getAllByRole("row");
      expect(rows).toHaveLength(3);
      return rows;
    });
    expect(within(me).getByRole("combobox")).toBeDisabled();
    expect(within(me).queryByRole("button", { name: "Ban" })).not.toBeInTheDocument();

    await user.selectOptions(within(other).getByRole("combobox", { name: "role of dev@example.com" }), "MODEL_DEVELOPER");
    await user.click(within(other).getByRole("button", { name: "Ban" }));
    expect(calls.filter((c) => c.method === "PATCH").map((c) => c.body)).toEqual([{ role: "MODEL_DEVELOPER" }, { banned: true }]);
    expect(await within(table).findByRole("button", { name: "Unban" })).toBeInTheDocument();
    expect(within(table).getByText("banned")).toBeInTheDocument();
  });

  it("shows the API's refusal of a new user beside the field", async () => {
    mockApi({
      "GET /users": [200, { users: [admin] }],
      "POST /users": apiError(409, "a user with email 'dev@example.com' already exists", "email"),
    });
    renderPage();
    const user = userEvent.setup();
    const form = screen.getByRole("form", { name: "create a user" });
    await user.type(within(form).getByLabelText("Email"), "dev@example.com");
    await user.type(within(form).getByLabelText("Password"), "long-enough");
    await user.click(within(form).getByRole("button", { name: "Add user" }));
    await waitFor(() => expect(within(form).getByLabelText("Email")).toHaveAccessibleDescription(/already exists/));
  });
});
