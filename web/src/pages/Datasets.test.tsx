import { act, render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter } from "react-router";
import { describe, expect, it, vi } from "vitest";

import { AuthProvider } from "../auth";
import { admin, mockApi, signInAs } from "../test/api";
import { Datasets } from "./Datasets";

/** An XMLHttpRequest that reports upload progress when told to, then answers. */
class FakeXhr {
  static last: FakeXhr | null = null;
  upload: { onprogress: ((e: { lengthComputable: boolean; loaded: number; total: number }) => void) | null } = { onprogress: null };
  onload: (() => void) | null = null;
  onerror: (() => void) | null = null;
  status = 0;
  responseText = "";
  headers: Record<string, string> = {};
  url = "";
  body: FormData | null = null;

  open(_method: string, url: string) {
    this.url = url;
  }
  setRequestHeader(name: string, value: string) {
    this.headers[name] = value;
  }
  send(body: FormData) {
    this.body = body;
    FakeXhr.last = this;
  }
  progress(loaded: number, total: number) {
    this.upload.onprogress?.({ lengthComputable: true, loaded, total });
  }
  answer(status: number, body: unknown) {
    this.status = status;
    this.responseText = JSON.stringify(body);
    this.onload?.();
  }
}

function renderPage() {
  signInAs(admin);
  render(
    <MemoryRouter>
      <AuthProvider>
        <Datasets />
      </AuthProvider>
    </MemoryRouter>,
  );
}

describe("Datasets", () => {
  it("uploads with a progress bar, then lists the new dataset", async () => {
    let datasets: unknown[] = [];
    mockApi({ "GET /datasets": () => [200, { datasets }] });
    vi.stubGlobal("XMLHttpRequest", FakeXhr);
    renderPage();
    const user = userEvent.setup();
    const form = screen.getByRole("form", { name: "upload a dataset" });
    await user.upload(within(form).getByLabelText("File"), new File(["a,b\n1,2\n"], "train.csv", { type: "text/csv" }));
    await user.type(within(form).getByLabelText("Target column"), "b");
    await user.click(within(form).getByRole("button", { name: "Upload" }));

    const xhr = FakeXhr.last!;
    expect(xhr.url).toBe("/api/v1/datasets");
    expect(xhr.headers.Authorization).toBe("Bearer token-1");
    expect(xhr.body!.get("name")).toBe("train.csv");
    expect(xhr.body!.get("format")).toBe("TABULAR");
    expect(xhr.body!.get("target")).toBe("b");
    act(() => xhr.progress(30, 100));
    expect(await screen.findByRole("progressbar", { name: "Upload" })).toHaveAttribute("aria-valuenow", "30");
    datasets = [{ id: 4, name: "train.csv", format: "TABULAR", size: 2048, owner_id: 1, created_at: "2030-01-01T00:00:00+00:00" }];
    act(() => xhr.answer(201, datasets[0]));
    const table = screen.getByRole("table", { name: "datasets" });
    expect(await within(table).findByRole("cell", { name: "train.csv" })).toBeInTheDocument();
    expect(within(table).getByRole("cell", { name: "2.0 KiB" })).toBeInTheDocument();
    expect(screen.queryByRole("progressbar")).not.toBeInTheDocument();
  });

  it("shows the API's complaint about the file beside the file", async () => {
    mockApi({ "GET /datasets": [200, { datasets: [] }] });
    vi.stubGlobal("XMLHttpRequest", FakeXhr);
    renderPage();
    const user = userEvent.setup();
    const form = screen.getByRole("form", { name: "upload a dataset" });
    await user.upload(within(form).getByLabelText("File"), new File(["x"], "bad.csv"));
    await user.click(within(form).getByRole("button", { name: "Upload" }));
    act(() => FakeXhr.last!.answer(400, { error: { code: "bad_request", message: "bad.csv: no data rows", field: "file" } }));
    await waitFor(() => expect(within(form).getByLabelText("File")).toHaveAccessibleDescription("bad.csv: no data rows"));
  });
});
