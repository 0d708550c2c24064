import { render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter, Route, Routes } from "react-router";
import { describe, expect, it } from "vitest";

import { apiError, mockApi } from "../test/api";
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
});
