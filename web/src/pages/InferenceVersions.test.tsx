import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";

import { apiError, mockApi } from "../test/api";
import { InferenceVersions } from "./InferenceVersions";

const V1 = {
  name: "v1",
  weight: 0.9,
  share: 0.9,
  trial_ids: [7, 8],
  members: [
    { trial_id: 7, model_name: "forest", score: 0.91 },
    { trial_id: 8, model_name: "sgd", score: 0.88 },
  ],
};
const V2 = { name: "v2", weight: 0.1, share: 0.1, trial_ids: [12], members: [{ trial_id: 12, model_name: "forest", score: 0.93 }] };
/** Revision 2 wants a canary and is served; rollback goes back to revision 1. */
const CANARY = {
  inference_job_id: 3,
  status: "RUNNING",
  revision: 2,
  versions: [V1, V2],
  rollback_to: 1,
  error: null,
  served_revision: 2,
  served_versions: [V1, V2],
  converged: true,
};
const ALONE = { ...V1, weight: 1, share: 1 };
const SINGLE = { ...CANARY, revision: 1, versions: [ALONE], rollback_to: null, served_revision: 1, served_versions: [ALONE] };

function renderVersions(active = true) {
  render(<InferenceVersions jobId={3} active={active} />);
  return screen.findByRole("table", { name: "versions" });
}

describe("the versions of an inference job", () => {
  it("lists the wanted versions with their trials and shares, and what the predictor serves", async () => {
    mockApi({ "GET /inference_jobs/3/versions": [200, CANARY] });
    const table = await renderVersions();
    expect(within(table).getAllByRole("row").slice(1).map((row) => row.querySelector("td")!.textContent)).toEqual(["v1", "v2"]);
    expect(screen.getByTestId("version-v1")).toHaveTextContent("#7 forest#8 sgd");
    expect(screen.getByTestId("share-v1")).toHaveTextContent("90%");
    expect(screen.getByTestId("share-v2")).toHaveTextContent("10%");
    expect(screen.getByLabelText("Weight of v1")).toHaveValue("90");
    expect(screen.getByLabelText("Weight of v2")).toHaveValue("10");
    expect(screen.getByTestId("versions-served")).toHaveTextContent("The predictor serves revision 2, as wanted.");
    expect(screen.getByRole("button", { name: "Promote v1" })).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Roll back to revision 1" })).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Apply weights" })).toBeDisabled();
  });

  it("offers no promote for a single version, no rollback without a previous revision, no controls when stopped", async () => {
    mockApi({ "GET /inference_jobs/3/versions": [200, SINGLE] });
    await renderVersions();
    expect(screen.queryByRole("button", { name: /Promote/ })).not.toBeInTheDocument();
    expect(screen.queryByRole("button", { name: /Roll back/ })).not.toBeInTheDocument();
    expect(screen.getByRole("form", { name: "add a version" })).toBeInTheDocument();
    cleanup();

    mockApi({ "GET /inference_jobs/3/versions": [200, { ...CANARY, status: "STOPPED" }] });
    await renderVersions(false);
    expect(screen.queryByRole("slider")).not.toBeInTheDocument();
    expect(screen.queryByRole("button")).not.toBeInTheDocument();
    expect(screen.getByTestId("share-v2")).toHaveTextContent("10%");
  });

  it("shows why a revision cannot be served, and what is served instead", async () => {
    const failed = { ...CANARY, revision: 3, converged: false, error: "trial 12 could not load: ModuleNotFoundError" };
    const calls = mockApi({ "GET /inference_jobs/3/versions": [200, failed] });
    await renderVersions();
    const state = screen.getByTestId("versions-served");
    expect(state).toHaveAttribute("role", "alert");
    expect(state).toHaveTextContent("Revision 3 cannot be served: trial 12 could not load: ModuleNotFoundError. It serves revision 2 (v1 90%, v2 10%).");
    // A failed revision is not polled for: nothing will change until someone changes the versions.
    await new Promise((resolve) => setTimeout(resolve, 1300));
    expect(calls).toHaveLength(1);
  });

  it("sends the slider's weights with the members unchanged, then follows the rollout until it is served", async () => {
    let served = 2;
    const calls = mockApi({
      "GET /inference_jobs/3/versions": () => [200, { ...CANARY, revision: 3, served_revision: served, converged: served === 3 }],
      "PUT /inference_jobs/3/versions": [200, { ...CANARY, revision: 3, converged: false }],
    });
    await renderVersions();
    fireEvent.change(screen.getByLabelText("Weight of v2"), { target: { value: "30" } });
    // 90 and 30 of 120: the shares the new weights would give.
    expect(screen.getByTestId("share-v1")).toHaveTextContent("75%");
    expect(screen.getByTestId("share-v2")).toHaveTextContent("25%");
    await userEvent.setup().click(screen.getByRole("button", { name: "Apply weights" }));

    await screen.findByText(/Rolling out revision 3/);
    expect(screen.getByTestId("versions-served")).toHaveTextContent("It serves revision 2 (v1 90%, v2 10%).");
    const put = calls.find((call) => call.method === "PUT")!;
    expect(put.body).toEqual({
      versions: [
        { name: "v1", trial_ids: [7, 8], weight: 90 },
        { name: "v2", trial_ids: [12], weight: 30 },
      ],
    });
    served = 3;
    await waitFor(() => expect(screen.getByTestId("versions-served")).toHaveTextContent("The predictor serves revision 3, as wanted."), {
      timeout: 3000,
    });
    expect(screen.getByTestId("versions-served")).toHaveAttribute("data-converged", "true");
  });

  it("shows the API's refusal beside the weight it names, or for the whole table", async () => {
    let answer = apiError(400, "'versions[1].weight' is -1; it must be between 0 and 1000000", "versions[1].weight");
    mockApi({ "GET /inference_jobs/3/versions": [200, CANARY], "PUT /inference_jobs/3/versions": () => answer });
    await renderVersions();
    const user = userEvent.setup();
    fireEvent.change(screen.getByLabelText("Weight of v2"), { target: { value: "50" } });
    await user.click(screen.getByRole("button", { name: "Apply weights" }));
    await waitFor(() => expect(screen.getByLabelText("Weight of v2")).toHaveAccessibleDescription(/'versions\[1\]\.weight' is -1/));
    expect(screen.getByLabelText("Weight of v1")).toHaveAttribute("aria-invalid", "false");

    answer = apiError(400, "the versions' weights sum to 0, so no version would get a request", "versions");
    fireEvent.change(screen.getByLabelText("Weight of v1"), { target: { value: "0" } });
    fireEvent.change(screen.getByLabelText("Weight of v2"), { target: { value: "0" } });
    expect(screen.getByTestId("share-v1")).toHaveTextContent("—");
    await user.click(screen.getByRole("button", { name: "Apply weights" }));
    const form = screen.getByRole("form", { name: "version weights" });
    await within(form).findByText(/weights sum to 0/);
    expect(screen.getByLabelText("Weight of v2")).toHaveAttribute("aria-invalid", "false");
    // Nothing changed: the wanted shares stay as they were.
    expect(screen.getByTestId("versions-served")).toHaveTextContent("The predictor serves revision 2, as wanted.");
  });

  it("promotes and rolls back with one call each, after a confirmation, and shows a refusal", async () => {
    const promoted = { ...CANARY, revision: 3, versions: [{ ...V2, share: 1 }], converged: true, served_revision: 3, rollback_to: 2 };
    const calls = mockApi({
      "GET /inference_jobs/3/versions": [200, CANARY],
      "POST /inference_jobs/3/versions/v2/promote": [200, promoted],
      "POST /inference_jobs/3/rollback": apiError(409, "inference job 3 is STOPPED", null),
    });
    await renderVersions();
    const user = userEvent.setup();
    const confirm = vi.spyOn(window, "confirm").mockReturnValueOnce(false).mockReturnValue(true);
    await user.click(screen.getByRole("button", { name: "Promote v2" }));
    expect(calls.filter((call) => call.method === "POST")).toHaveLength(0);
    await user.click(screen.getByRole("button", { name: "Promote v2" }));
    expect(confirm).toHaveBeenLastCalledWith("Give v2 all the requests? v1 will no longer be served.");
    await waitFor(() => expect(screen.getAllByRole("row")).toHaveLength(2));
    expect(screen.getByTestId("version-v2")).toBeInTheDocument();
    expect(screen.queryByTestId("version-v1")).not.toBeInTheDocument();

    await user.click(screen.getByRole("button", { name: "Roll back to revision 2" }));
    await screen.findByText("inference job 3 is STOPPED");
    expect(calls.filter((call) => call.method === "POST").map((call) => call.path)).toEqual([
      "/inference_jobs/3/versions/v2/promote",
      "/inference_jobs/3/rollback",
    ]);
  });

  it("adds a canary with its share of the requests, the others keeping theirs of the rest", async () => {
    let answer = apiError(400, "versions[1].trial_ids[1]: app 'fraud' has no trial with id 99", "versions[1].trial_ids[1]");
    const calls = mockApi({ "GET /inference_jobs/3/versions": [200, SINGLE], "PUT /inference_jobs/3/versions": () => answer });
    await renderVersions();
    const form = screen.getByRole("form", { name: "add a version" });
    expect(within(form).getByLabelText("Version name")).toHaveValue("v2");
    const user = userEvent.setup();
    await user.type(within(form).getByLabelText("Trial ids"), "12, 99");
    await user.clear(within(form).getByLabelText("Share of the requests (%)"));
    await user.type(within(form).getByLabelText("Share of the requests (%)"), "20");
    await user.click(within(form).getByRole("button", { name: "Add version" }));
    await waitFor(() => expect(within(form).getByLabelText("Trial ids")).toHaveAccessibleDescription(/no trial with id 99/));
    expect(calls.find((call) => call.method === "PUT")!.body).toEqual({
      versions: [
        { name: "v1", trial_ids: [7, 8], weight: 80 },
        { name: "v2", trial_ids: [12, 99], weight: 20 },
      ],
    });

    await user.clear(within(form).getByLabelText("Share of the requests (%)"));
    await user.type(within(form).getByLabelText("Share of the requests (%)"), "150");
    await user.click(within(form).getByRole("button", { name: "Add version" }));
    expect(within(form).getByLabelText("Share of the requests (%)")).toHaveAccessibleDescription(/between 0 and 100/);
    expect(calls.filter((call) => call.method === "PUT")).toHaveLength(1);

    answer = apiError(400, "versions[1].name: 'v1' is already the name of versions[0]; each version needs its own", "versions[1].name");
    await user.clear(within(form).getByLabelText("Share of the requests (%)"));
    await user.type(within(form).getByLabelText("Share of the requests (%)"), "20");
    await user.clear(within(form).getByLabelText("Version name"));
    await user.type(within(form).getByLabelText("Version name"), "v1");
    await user.click(within(form).getByRole("button", { name: "Add version" }));
    await waitFor(() => expect(within(form).getByLabelText("Version name")).toHaveAccessibleDescription(/already the name/));
    expect(within(form).getByLabelText("Trial ids")).toHaveAttribute("aria-invalid", "false");
  });
});
