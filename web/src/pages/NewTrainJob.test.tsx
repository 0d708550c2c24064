import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter, Route, Routes } from "react-router";
import { describe, expect, it } from "vitest";

import { type Call, apiError, mockApi } from "../test/api";
import { NewTrainJob } from "./NewTrainJob";

const OPENAPI = {
  paths: {
    "/api/v1/train_jobs": {
      post: {
        requestBody: {
          content: {
            "application/json": {
              schema: { properties: { task: { enum: ["TABULAR_CLASSIFICATION", "IMAGE_CLASSIFICATION"] }, strategy: { enum: ["auto", "random", "tpe"] } } },
            },
          },
        },
      },
    },
  },
};

const ROUTES = {
  "GET /openapi.json": [200, OPENAPI] as [number, unknown],
  "GET /datasets": [
    200,
    {
      datasets: [
        { id: 1, name: "train csv", format: "TABULAR" },
        { id: 2, name: "val csv", format: "TABULAR" },
        { id: 3, name: "images", format: "IMAGE_FILES" },
      ],
    },
  ] as [number, unknown],
  "GET /models": [
    200,
    {
      models: [
        { id: 5, name: "forest", class_name: "Forest", task: "TABULAR_CLASSIFICATION", knob_config: {} },
        { id: 7, name: "mlp", class_name: "Mlp", task: "TABULAR_CLASSIFICATION", knob_config: { short: { type: "PolicyKnob", policy: "EARLY_STOP" } } },
        { id: 6, name: "cnn", class_name: "Cnn", task: "IMAGE_CLASSIFICATION", knob_config: {} },
      ],
    },
  ] as [number, unknown],
};

function renderForm() {
  render(
    <MemoryRouter initialEntries={["/jobs/new"]}>
      <Routes>
        <Route path="/jobs/new" element={<NewTrainJob />} />
        <Route path="/jobs/:app/:version" element={<p>job page</p>} />
      </Routes>
    </MemoryRouter>,
  );
}

async function fillValidForm(user: ReturnType<typeof userEvent.setup>) {
  await user.type(screen.getByLabelText("App"), "fraud");
  await within(screen.getByLabelText("Train dataset")).findByRole("option", { name: "train csv (#1)" });
  await user.selectOptions(screen.getByLabelText("Train dataset"), "1");
  await user.selectOptions(screen.getByLabelText("Validation dataset"), "2");
  await user.click(screen.getByRole("checkbox", { name: /forest/ }));
}

/** The train_args and the options of the create request the form sent. */
function sentTrainArgs(calls: Call[]): unknown {
  return (calls.find((c) => c.method === "POST")!.body as { train_args: unknown }).train_args;
}

function sentOptions(calls: Call[]): unknown {
  return (calls.find((c) => c.method === "POST")!.body as { options: unknown }).options;
}

async function typeTrainArgs(user: ReturnType<typeof userEvent.setup>, json: string) {
  const args = screen.getByLabelText("Train args");
  await user.clear(args);
  await user.click(args);
  await user.paste(json);
}

const created: [number, unknown] = [201, { app: "fraud", app_version: 1 }];

describe("NewTrainJob", () => {
  it("offers only the datasets, templates and advisors that fit, from the API", async () => {
    mockApi(ROUTES);
    renderForm();
    const user = userEvent.setup();
    expect(await screen.findByRole("option", { name: "tpe" })).toBeInTheDocument();
    const train = screen.getByLabelText("Train dataset");
    expect(within(train).queryByRole("option", { name: "images (#3)" })).not.toBeInTheDocument();
    expect(screen.getByRole("checkbox", { name: /forest/ })).toBeInTheDocument();
    expect(screen.queryByRole("checkbox", { name: /cnn/ })).not.toBeInTheDocument();
    await user.selectOptions(screen.getByLabelText("Task"), "IMAGE_CLASSIFICATION");
    expect(within(train).getByRole("option", { name: "images (#3)" })).toBeInTheDocument();
    expect(screen.getByRole("checkbox", { name: /cnn/ })).toBeInTheDocument();
  });

  it("shows the API's budget error beside its field and sends the budget as typed", async () => {
    const calls = mockApi({
      ...ROUTES,
      "POST /train_jobs": apiError(400, "budget.TIME_HOURS: must be above 0 and at most 8760, got -1", "budget.TIME_HOURS"),
    });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await user.type(screen.getByLabelText("TIME_HOURS"), "-1");
    await user.click(screen.getByRole("button", { name: "Create train job" }));

    const time = screen.getByLabelText("TIME_HOURS");
    expect(time).toHaveAttribute("aria-invalid", "true");
    expect(time).toHaveAccessibleDescription(/must be above 0/);
    expect(screen.getByLabelText("MODEL_TRIAL_COUNT")).toHaveAttribute("aria-invalid", "false");
    const sent = calls.find((c) => c.method === "POST")!.body as Record<string, unknown>;
    expect(sent).toEqual({
      app: "fraud",
      task: "TABULAR_CLASSIFICATION",
      train_dataset_id: 1,
      val_dataset_id: 2,
      model_ids: [5],
      budget: { GPU_COUNT: 0, TIME_HOURS: -1, MODEL_TRIAL_COUNT: 10 },
      strategy: "auto",
      train_args: {},
      options: {},
    });
  });

  it("puts an indexed error on the templates and a budget-wide one on the budget", async () => {
    let answer = apiError(400, "model 5 ('forest') is for X", "model_ids[0]");
    mockApi({ ...ROUTES, "POST /train_jobs": () => answer });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    const models = screen.getByRole("group", { name: "Model templates" });
    expect(await within(models).findByRole("alert")).toHaveTextContent("model 5 ('forest') is for X");

    answer = apiError(400, "give TIME_HOURS or MODEL_TRIAL_COUNT", "budget");
    await user.clear(screen.getByLabelText("MODEL_TRIAL_COUNT"));
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    const budget = screen.getByRole("group", { name: "Budget" });
    expect(await within(budget).findByRole("alert")).toHaveTextContent("give TIME_HOURS or MODEL_TRIAL_COUNT");
    expect(within(models).queryByRole("alert")).not.toBeInTheDocument();
  });

  it("refuses train args that are not a JSON object before asking the API", async () => {
    const calls = mockApi(ROUTES);
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    const args = screen.getByLabelText("Train args");
    await user.clear(args);
    await user.click(args);
    await user.paste("[1]");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    expect(args).toHaveAccessibleDescription(/must be a JSON object/);
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("opens the new job's page once it is created", async () => {
    mockApi({ ...ROUTES, "POST /train_jobs": [201, { app: "fraud", app_version: 3 }] });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    expect(await screen.findByText("job page")).toBeInTheDocument();
  });

  it("adds no job option key while the controls are at their defaults", async () => {
    const calls = mockApi({ ...ROUTES, "POST /train_jobs": created });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    expect(screen.getByRole("checkbox", { name: "Warm start" })).toBeChecked();
    expect(screen.getByLabelText("Fusion")).toHaveValue("off");
    expect(screen.getByLabelText("Rule")).toHaveValue("none");
    await typeTrainArgs(user, '{"epochs": 2}');
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    expect(await screen.findByText("job page")).toBeInTheDocument();
    expect(sentTrainArgs(calls)).toEqual({ epochs: 2 });
    expect(sentOptions(calls)).toEqual({});
  });

  it("writes the policies and early stopping the controls set, beside the typed train args", async () => {
    const calls = mockApi({ ...ROUTES, "POST /train_jobs": created });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await typeTrainArgs(user, '{"epochs": 2}');
    await user.click(screen.getByRole("checkbox", { name: /^EARLY_STOP/ }));
    await user.click(screen.getByRole("checkbox", { name: /^SHARE_PARAMS/ }));
    await user.selectOptions(screen.getByLabelText("Share from"), "best");
    await user.type(screen.getByLabelText("final_trials"), "2");
    await user.type(screen.getByLabelText("final_fraction"), "0.5");
    await user.selectOptions(screen.getByLabelText("Rule"), "asha");
    await user.type(screen.getByLabelText("eta"), "4");
    await user.type(screen.getByLabelText("max_resource"), "27");
    await user.type(screen.getByLabelText("Metric"), "error");
    await user.selectOptions(screen.getByLabelText("Mode"), "min");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    expect(await screen.findByText("job page")).toBeInTheDocument();
    expect(sentTrainArgs(calls)).toEqual({ epochs: 2 });
    expect(sentOptions(calls)).toEqual({
      policies: { EARLY_STOP: true, SHARE_PARAMS: "best", final_trials: 2, final_fraction: 0.5 },
      early_stopping: { rule: "asha", eta: 4, max_resource: 27, metric: "error", mode: "min" },
    });
  });

  it("writes a final phase's options only while a policy that has one is on, and only the chosen rule's options", async () => {
    const calls = mockApi({ ...ROUTES, "POST /train_jobs": created });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await user.click(screen.getByRole("checkbox", { name: /^DOWNSCALE/ }));
    await user.type(screen.getByLabelText("final_trials"), "3");
    await user.click(screen.getByRole("checkbox", { name: /^DOWNSCALE/ }));
    expect(screen.queryByLabelText("final_trials")).not.toBeInTheDocument();
    await user.click(screen.getByRole("checkbox", { name: /^SHARE_PARAMS/ }));
    await user.selectOptions(screen.getByLabelText("Rule"), "asha");
    await user.type(screen.getByLabelText("eta"), "4");
    await user.selectOptions(screen.getByLabelText("Rule"), "median");
    await user.type(screen.getByLabelText("min_trials"), "5");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    expect(await screen.findByText("job page")).toBeInTheDocument();
    expect(sentOptions(calls)).toEqual({ policies: { SHARE_PARAMS: "recent" }, early_stopping: { rule: "median", min_trials: 5 } });
  });

  it("writes warm start off and fusion auto or a largest group", async () => {
    const calls = mockApi({ ...ROUTES, "POST /train_jobs": apiError(400, "not now") });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await user.click(screen.getByRole("checkbox", { name: "Warm start" }));
    await user.selectOptions(screen.getByLabelText("Fusion"), "auto");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    expect(await screen.findByText("not now")).toBeInTheDocument();
    expect(sentOptions(calls)).toEqual({ warm_start: false, fusion: "auto" });

    calls.length = 0;
    await user.click(screen.getByRole("checkbox", { name: "Warm start" }));
    await user.selectOptions(screen.getByLabelText("Fusion"), "max_group");
    await user.type(screen.getByLabelText("K"), "4");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    await screen.findByText("not now");
    expect(sentOptions(calls)).toEqual({ fusion: { max_group: 4 } });
  });

  it("refuses a largest fusion group below 1 beside it, before asking the API", async () => {
    const calls = mockApi(ROUTES);
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await user.selectOptions(screen.getByLabelText("Fusion"), "max_group");
    await user.type(screen.getByLabelText("K"), "0");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    expect(screen.getByLabelText("K")).toHaveAccessibleDescription(/max_group must be a whole number >= 1.*got 0/);
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("refuses a job option typed in the train args, naming the control that sets it", async () => {
    const calls = mockApi(ROUTES);
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await typeTrainArgs(user, '{"epochs": 2, "policies": {"EARLY_STOP": true}, "warm_start": false}');
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    expect(screen.getByLabelText("Train args")).toHaveAccessibleDescription(/"policies", "warm_start".*\(Policies, Warm start\)/);
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("sends a tabular job's target column as its field, and none for an image job", async () => {
    const calls = mockApi({ ...ROUTES, "POST /train_jobs": apiError(400, "not now") });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    const post = () => calls.filter((c) => c.method === "POST").at(-1)!.body as Record<string, unknown>;
    // Blank: none sent, and train() keeps its own default.
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    await screen.findByText("not now");
    expect(post()).not.toHaveProperty("target");
    await user.type(screen.getByLabelText("Target column"), "label");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    await waitFor(() => expect(post()).toMatchObject({ target: "label", train_args: {} }));
    // An image job's datasets have no target column: no control, nothing sent, and "target" is a train() argument.
    await user.selectOptions(screen.getByLabelText("Task"), "IMAGE_CLASSIFICATION");
    expect(screen.queryByLabelText("Target column")).not.toBeInTheDocument();
    await typeTrainArgs(user, '{"target": "label"}');
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    await waitFor(() => expect(post()).toMatchObject({ task: "IMAGE_CLASSIFICATION", train_args: { target: "label" } }));
    expect(post()).not.toHaveProperty("target");
  });

  it("refuses a tabular job's target typed in the train args, pointing at its control", async () => {
    const calls = mockApi(ROUTES);
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await typeTrainArgs(user, '{"target": "label"}');
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    expect(screen.getByLabelText("Train args")).toHaveAccessibleDescription(/"target".*\(Target column\)/);
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("shows the API's error on the target beside its control", async () => {
    mockApi({ ...ROUTES, "POST /train_jobs": apiError(400, "'target' holds the control character '\\t'", "target") });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await user.type(screen.getByLabelText("Target column"), "la");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    await waitFor(() => expect(screen.getByLabelText("Target column")).toHaveAccessibleDescription(/control character/));
    expect(screen.getByLabelText("Train args")).toHaveAttribute("aria-invalid", "false");
  });

  it("shows the API's errors on job options beside their controls", async () => {
    let answer = apiError(400, "options.policies.EARLY_STOP: must be true or false, got 1", "options.policies.EARLY_STOP");
    mockApi({ ...ROUTES, "POST /train_jobs": () => answer });
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await user.click(screen.getByRole("checkbox", { name: /^EARLY_STOP/ }));
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    const policies = screen.getByRole("group", { name: "Policies" });
    expect(await within(policies).findByRole("alert")).toHaveTextContent("must be true or false");
    expect(screen.getByLabelText("Train args")).toHaveAttribute("aria-invalid", "false");

    answer = apiError(400, "options.policies.final_trials: must be >= 1, got 0", "options.policies.final_trials");
    await user.type(screen.getByLabelText("final_trials"), "0");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    await waitFor(() => expect(screen.getByLabelText("final_trials")).toHaveAccessibleDescription(/must be >= 1, got 0/));

    answer = apiError(400, "options.early_stopping: asha option eta=1 must be a whole number >= 2", "options.early_stopping");
    await user.selectOptions(screen.getByLabelText("Rule"), "asha");
    await user.click(screen.getByRole("button", { name: "Create train job" }));
    const stopping = screen.getByRole("group", { name: "Early stopping" });
    expect(await within(stopping).findByRole("alert")).toHaveTextContent("eta=1");
    expect(within(policies).queryByRole("alert")).not.toBeInTheDocument();
  });

  it("says which chosen templates a policy is off for", async () => {
    mockApi(ROUTES);
    renderForm();
    const user = userEvent.setup();
    await fillValidForm(user);
    await user.click(screen.getByRole("checkbox", { name: /mlp/ }));
    await user.click(screen.getByRole("checkbox", { name: /^EARLY_STOP/ }));
    await user.click(screen.getByRole("checkbox", { name: /^DOWNSCALE/ }));
    const policies = screen.getByRole("group", { name: "Policies" });
    expect(within(policies).getByText("off for forest: its template does not declare EARLY_STOP")).toBeInTheDocument();
    expect(within(policies).getByText("off for forest, mlp: their templates do not declare DOWNSCALE")).toBeInTheDocument();
  });
});
