// The one way pages talk to the admin API: bearer token in, ApiError out.

export const API_PREFIX = "/api/v1";

/** An error answer of the API: `{"error": {"code", "message", "field"}}` with its status. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | null;

  constructor(status: number, code: string, message: string, field: string | null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

interface Session {
  token: () => string | null;
  /** Called when a request with a token answers 401: the token expired or the user was banned. */
  expired: () => void;
}

let session: Session = { token: () => null, expired: () => undefined };

export function configureSession(next: Session): void {
  session = next;
}

function authHeaders(extra: Record<string, string> = {}): Record<string, string> {
  const token = session.token();
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

function errorFrom(status: number, body: unknown, hadToken: boolean): ApiError {
  const error = (body as { error?: { code?: string; message?: string; field?: string | null } } | null)?.error;
  if (status === 401 && hadToken) session.expired();
  return new ApiError(
    status,
    error?.code ?? "error",
    error?.message ?? `the server answered ${status} without an explanation`,
    error?.field ?? null,
  );
}

export interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** `method path` under /api/v1; JSON in and out (FormData is sent as multipart). */
export async function request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
  const { body, signal } = options;
  const isForm = typeof FormData !== "undefined" && body instanceof FormData;
  const headers = authHeaders({ Accept: "application/json", ...(options.headers ?? {}) });
  if (body !== undefined && !isForm) headers["Content-Type"] = "application/json";
  const hadToken = "Authorization" in headers;
  let response: Response;
  try {
    response = await fetch(API_PREFIX + path, {
      method,
      headers,
      body: body === undefined ? undefined : isForm ? (body as FormData) : JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw new ApiError(0, "network_error", "the server cannot be reached; is baobab up running?", null);
  }
  if (response.status === 204) return undefined as T;
  const data: unknown = await response.json().catch(() => null);
  if (!response.ok) throw errorFrom(response.status, data, hadToken);
  return data as T;
}

export const get = <T>(path: string, signal?: AbortSignal) => request<T>("GET", path, { signal });
export const post = <T>(path: string, body?: unknown, headers?: Record<string, string>) =>
  request<T>("POST", path, { body, headers });
export const patch = <T>(path: string, body: unknown) => request<T>("PATCH", path, { body });
export const put = <T>(path: string, body: unknown) => request<T>("PUT", path, { body });
export const del = (path: string) => request<void>("DELETE", path);

/** A multipart upload with progress (fetch cannot report upload progress; XMLHttpRequest can). */
export function upload<T>(path: string, form: FormData, onProgress: (fraction: number) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", API_PREFIX + path);
    const headers = authHeaders({ Accept: "application/json" });
    for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable && event.total > 0) onProgress(event.loaded / event.total);
    };
    xhr.onerror = () => reject(new ApiError(0, "network_error", "the upload failed: the server cannot be reached", null));
    xhr.onload = () => {
      let data: unknown = null;
      try {
        data = xhr.responseText ? JSON.parse(xhr.responseText) : null;
      } catch {
        data = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(1);
        resolve(data as T);
      } else {
        reject(errorFrom(xhr.status, data, "Authorization" in headers));
      }
    };
    xhr.send(form);
  });
}

/** Saves what `GET path` answers as a file: a plain link could not carry the bearer token. */
export async function download(path: string, fileName: string): Promise<void> {
  const headers = authHeaders();
  const response = await fetch(API_PREFIX + path, { headers });
  if (!response.ok) {
    throw errorFrom(response.status, await response.json().catch(() => null), "Authorization" in headers);
  }
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = fileName;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** The message to show for anything a request threw. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
