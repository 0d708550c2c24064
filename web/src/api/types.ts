// What the admin API answers (see GET /api/v1/openapi.json).

export type Role = "SUPERADMIN" | "ADMIN" | "MODEL_DEVELOPER" | "APP_DEVELOPER";
export const ROLES: Role[] = ["SUPERADMIN", "ADMIN", "MODEL_DEVELOPER", "APP_DEVELOPER"];

// INVALID: the template found its architecture cannot be built for these knobs; no score, and no error.
export type TrialStatus = "PENDING" | "RUNNING" | "COMPLETED" | "ERRORED" | "STOPPED" | "CANCELLED" | "INVALID";
export const TRIAL_STATUSES: TrialStatus[] = ["RUNNING", "PENDING", "COMPLETED", "STOPPED", "INVALID", "ERRORED", "CANCELLED"];
export type JobStatus = "PENDING" | "RUNNING" | "STOPPING" | "COMPLETED" | "ERRORED" | "STOPPED";
export type InferenceStatus = "STARTING" | "RUNNING" | "ERRORED" | "STOPPED";

export interface User {
  id: number;
  email: string;
  role: Role;
  banned: boolean;
  created_at: string;
}

export interface Dataset {
  id: number;
  name: string;
  format: "IMAGE_FILES" | "TABULAR";
  size: number;
  checksum: string;
  owner_id: number;
  created_at: string;
}

export type KnobSpec =
  | { type: "FloatKnob" | "IntegerKnob"; value_min: number; value_max: number; is_exp: boolean }
  | { type: "CategoricalKnob"; values: unknown[] }
  | { type: "FixedKnob"; value: unknown }
  | { type: "ArchKnob"; items: unknown[][] }
  | { type: "PolicyKnob"; policy: string };

export interface Model {
  id: number;
  name: string;
  task: string;
  class_name: string;
  access: "PUBLIC" | "PRIVATE";
  dependencies: Record<string, string>;
  knob_config: Record<string, KnobSpec>;
  checksum: string;
  owner_id: number;
  created_at: string;
}

export type TrialCounts = Record<TrialStatus, number>;

export interface BudgetUsed {
  time_s: number;
  time_limit_s: number | null;
  trials: number;
  trial_limit: number | null;
}

/** One of an ENAS sub-job's final evaluations: its score on the shared weights, and trained alone if it was. */
export interface RankedArchitecture {
  trial_id: number;
  knobs: Record<string, unknown>;
  shared_score: number | null;
  standalone_trial_id: number | null;
  standalone_score: number | null;
}

export interface SubJob {
  id: number;
  model_id: number;
  model_name: string;
  strategy: string;
  status: JobStatus;
  error: string | null;
  trial_counts: TrialCounts;
  /** ENAS sub-jobs, in a job's detail: the final evaluations, best first. */
  final_ranking?: RankedArchitecture[];
}

export interface TrainJob {
  id: number;
  app: string;
  app_version: number;
  task: string;
  status: JobStatus;
  error: string | null;
  train_dataset_id: number;
  val_dataset_id: number;
  budget: Record<string, number>;
  train_args: Record<string, unknown>;
  /** What the job asks the platform for (early stopping, policies, fusion, ...), as POST /train_jobs takes them. */
  options: Record<string, unknown>;
  /** A tabular job's target column, which train() receives as target; null when it names none (or an image job). */
  target: string | null;
  /** What every proposal and trial seed derives from; null for a job older than seeds. */
  seed: number | null;
  owner_id: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  trial_counts: TrialCounts;
  best_score: number | null;
  budget_used: BudgetUsed;
  /** What the placement planner predicted; null while the driver's fixed rules place trials. */
  placement: Placement | null;
  /** Under fusion "auto", by sub-job id: the driver's latest decision whether its trials measure fusion profiles. */
  fusion_profiling: Record<string, FusionProfiling> | null;
  /** Under resources.gpu_share "auto": how many trials share each GPU, and why; null otherwise or before a decision. */
  gpu_share: GpuShare | null;
  sub_jobs: SubJob[];
}

/** How many of a GPU job's trials share each of its GPUs (the driver's measured decisions). */
export interface GpuShare {
  level: number;
  settled: boolean;
  peak_mb: number;
  device_mb: number | null;
  changes: { level: number; reason: string }[];
  retried_alone: number[];
}

/** Why a sub-job's trials measure fusion profiles, wait, or skip them (the driver's profiling gate). */
export interface FusionProfiling {
  model: string;
  decision: "profile" | "wait" | "skip";
  reason: string;
  at: string;
}

/** The placement planner's view of a job: its method, why it fell back to the rules, its predictions. */
/** GET /train_jobs/<app>/<version>/time_breakdown: seconds per phase over the job's trials. */
export interface PhaseSeconds {
  seconds: Record<string, number>;
  total_s: number;
  trials: number;
}

export interface TimeBreakdown extends PhaseSeconds {
  /** The phases in the order of a trial's life: wait, fetch, warm_start, profile, build, train, evaluate, store. */
  phases: string[];
  sub_jobs: (PhaseSeconds & { sub_job_id: number; model_id: number })[];
}

export interface Placement {
  method: string;
  fallback: string | null;
  /** [when, the job's predicted finish, the slots' predicted utilisation], oldest first. */
  predictions: [string, string, number][];
}

/** A train job as GET /train_jobs lists it: without train_args unless ?include=train_args asks. */
export type TrainJobSummary = Omit<TrainJob, "train_args">;

export interface Trial {
  id: number;
  train_job_id: number;
  sub_job_id: number;
  model_id: number;
  model_name: string;
  number: number;
  knobs: Record<string, unknown>;
  policies: Record<string, boolean>;
  status: TrialStatus;
  score: number | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  duration_s: number | null;
  worker: string | null;
  attempts: number;
  error: string | null;
  has_params: boolean;
  /** The zoo model this trial's model was initialised from (warm start), and how alike they are. */
  parent_zoo_model_id: number | null;
  similarity: number | null;
  /** The fused group it was submitted in (trained in one process with its group-mates), null when run alone. */
  fused_group: FusedGroup | null;
  /** Under the job option fusion "auto", on the trial asked to measure fusion for its structure: the request, then the measurement; null on the others. */
  fusion_profile: FusionProfile | null;
  traceback?: string | null;
  /** GET /trials/<id> only: the search phase it ran in ("final": the retrain of a best configuration). */
  phase?: string | null;
  /** GET /trials/<id> only: where its starting weights came from. */
  lineage?: Lineage;
  /** GET /trials/<id> only: GET /trials/<id>/architecture has the record of the SpaceModel instance it trained. */
  has_architecture?: boolean;
}

/** Trials of one sub-job that one worker process trained together (options.fusion). */
export interface FusedGroup {
  /** The id of the group's first trial. */
  id: number;
  size: number;
  /** GET /trials/<id> only: the group's trials. */
  members?: { id: number; number: number }[];
}

/** The job driver's request to a trial to measure fusion before it trains, up to `max_group` stacked copies. */
export interface FusionRequest {
  max_group: number;
  /** The seconds measuring may take: the sub-job's measurements share a tenth of its work; absent, the worker's own limit. */
  budget_s?: number;
}

/** The request with what the worker measured (the API stores a request alone or with all of these). */
export interface FusionMeasurement extends FusionRequest {
  /** Group size as a decimal string ("1": the trial trained alone, unfused) → training rows per second of all members together. Empty when nothing was measured. */
  samples_per_s: Record<string, number>;
  /** The group size later trials of the same structure run in: 1 or one of the sizes measured. */
  best: number;
  /** What measuring took. */
  seconds: number;
  /** Why the sizes stopped below `max_group`, or why the model cannot fuse; null when nothing stopped them. */
  reason: string | null;
}

/** A trial's `fusion_profile` (job option options.fusion "auto"): the request, then the request with its measurement. */
export type FusionProfile = FusionRequest | FusionMeasurement;

/** One node of a SpaceModel instance's graph (GET /trials/<id>/architecture). */
export interface ArchitectureNode {
  name: string;
  /** The torch.fx opcode: placeholder, call_module, call_function, call_method, get_attr, output. */
  op: string;
  /** The operator in a word: a module class, a function or a method. */
  what: string;
  /** Names of earlier nodes it reads (the API checks that each names an earlier node). */
  inputs: string[];
  /** Differs from the space's base: replaced, inserted or fed differently. */
  changed: boolean;
  /** The mutator that changed it, if one did. */
  mutator: string | null;
}

/** The mutation record of the instance a SpaceModel trial trained; nodes in the order the graph runs them. */
export interface Architecture {
  choices: Record<string, unknown>;
  graph_key: string;
  nodes: ArchitectureNode[];
}

/** One ancestor of a trial's weights, nearest first; one the caller may not see is only `{hidden: true}`. */
export type Ancestor =
  | { hidden: true }
  | {
      /** How its child started from it: a zoo model, or shared parameters (SHARE_PARAMS). */
      via: "zoo" | "shared_params";
      /** A trial's model, a zoo model uploaded outside a job, one gone since, or shared weights holding
       * this trial's update added onto those `merged_onto` left (shared trainings that ran at once). */
      source: "trial" | "upload" | "removed" | "merged";
      trial_id: number | null;
      number: number | null;
      train_job_id: number | null;
      app: string | null;
      app_version: number | null;
      zoo_model_id: number | null;
      similarity: number | null;
      /** Null when unknown (not a trial). */
      epochs: number | null;
      phase: string | null;
      /** A merge only: the trial (null: gone since) whose shared weights this trial's update was added onto. */
      merged_onto: { trial_id: number | null; number: number } | null;
    };

export interface Lineage {
  from: "scratch" | "zoo" | "shared_params";
  chain: Ancestor[];
  /** Epochs trained up the chain, hidden ancestors included. */
  inherited_epochs: number;
  /** The chain goes on past the ancestors listed (the API lists 50 at most). */
  truncated: boolean;
}

/** A trial as the charts need it (from GET .../trials/changes). */
export interface TrialPoint {
  id: number;
  number: number;
  model_id: number;
  status: TrialStatus;
  score: number | null;
  /** When it finished, in ms since the epoch (the API sends seconds). */
  finished_ms: number | null;
  knobs: Record<string, unknown>;
  policies: Record<string, boolean>;
}

export interface TrialPage {
  trials: Trial[];
  total: number;
  page: number;
  per_page: number;
}

/** GET .../trials/changes: each trial an array of the values named in `fields` (a large job sends 100,000). */
export interface TrialChanges {
  fields: string[];
  trials: unknown[][];
  last_id: number;
  more: boolean;
}

/** GET .../trials/sample: the trials the job page's charts draw, as of `last_id`. */
export interface TrialSample {
  fields: string[];
  trials: unknown[][];
  last_id: number;
  /** Per template id: its trials with a score that the sample left out. */
  omitted: Record<string, number>;
}

export interface MetricRow {
  step: number;
  time: string;
  metrics: Record<string, number | null>;
}

export interface LogLine {
  id: number;
  time: string;
  line: string;
}

export interface InferenceJob {
  id: number;
  app: string;
  app_version: number;
  train_job_id: number;
  status: InferenceStatus;
  public: boolean;
  predictor_url: string | null;
  error: string | null;
  owner_id: number;
  created_at: string;
  stopped_at: string | null;
  members: { trial_id: number; model_name: string; score: number | null }[];
  /** The share of answered requests the predictor logs (0: none). */
  request_log_rate: number;
  api_key?: string;
}

/** One interval of a predictor's serving; latencies and batch size are null when nothing was answered or batched. */
export interface StatsPoint {
  time: string;
  requests: number;
  requests_per_s: number;
  p50_ms: number | null;
  p99_ms: number | null;
  batch_size: number | null;
}

/** `GET /inference_jobs/<id>/stats`: the last hour of serving, a point per interval, oldest first. */
export interface InferenceStats {
  interval_s: number;
  window_s: number;
  points: StatsPoint[];
}

/** A day of an inference job's request log (`GET /inference_jobs/<id>/request_logs`). */
export interface RequestLogDay {
  day: string;
  name: string;
  size_bytes: number;
}

/** A version an inference job serves: a named set of trials ensembled together, and its traffic weight. */
export interface InferenceVersion {
  name: string;
  weight: number;
  /** Its share of the requests: weight / sum of the weights. */
  share: number;
  /** Best first. */
  trial_ids: number[];
  members: { trial_id: number; model_name: string; score: number | null }[];
}

/** `GET /inference_jobs/<id>/versions`: the versions wanted (`revision`) and those the predictor serves now. */
export interface InferenceVersions {
  inference_job_id: number;
  status: InferenceStatus;
  revision: number;
  versions: InferenceVersion[];
  /** The revision `POST .../rollback` goes back to; null: nothing to roll back to. */
  rollback_to: number | null;
  /** Why the predictor could not serve the wanted revision (it serves the one before). */
  error: string | null;
  served_revision: number | null;
  served_versions: InferenceVersion[] | null;
  converged: boolean;
}

/** A version as `PUT /inference_jobs/<id>/versions` takes it (weight 1 when left out). */
export interface VersionSpec {
  name: string;
  trial_ids: unknown[];
  weight?: unknown;
}

export interface Prediction {
  predictions: unknown[];
  /** The version that answered. */
  version?: string;
  members?: { answered: number[]; left_out: { trial_id: number; reason: string }[] };
}

export function isAdmin(role: Role | undefined): boolean {
  return role === "SUPERADMIN" || role === "ADMIN";
}

export function canUploadModels(role: Role | undefined): boolean {
  return role === "MODEL_DEVELOPER" || isAdmin(role);
}

export function isFinished(status: JobStatus): boolean {
  return status === "COMPLETED" || status === "ERRORED" || status === "STOPPED";
}

export function isTrialOpen(status: TrialStatus): boolean {
  return status === "PENDING" || status === "RUNNING";
}
