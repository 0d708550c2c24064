import { useEffect, useState } from "react";

import { get } from "../api/client";

/** The choices the API takes, read from its OpenAPI document so that the forms never fall behind it. */
export interface ApiEnums {
  tasks: string[];
  strategies: string[];
}

const FALLBACK: ApiEnums = {
  tasks: ["IMAGE_CLASSIFICATION", "TABULAR_CLASSIFICATION", "TABULAR_REGRESSION"],
  strategies: ["auto"],
};

let cached: Promise<ApiEnums> | null = null;

type Schema = { properties?: Record<string, { enum?: string[] }> };

export function enumsFrom(document: unknown): ApiEnums {
  const body = (
    document as {
      paths?: Record<string, { post?: { requestBody?: { content?: Record<string, { schema?: Schema }> } } }>;
    }
  )?.paths?.["/api/v1/train_jobs"]?.post?.requestBody?.content?.["application/json"]?.schema;
  return {
    tasks: body?.properties?.task?.enum ?? FALLBACK.tasks,
    strategies: body?.properties?.strategy?.enum ?? FALLBACK.strategies,
  };
}

export function loadEnums(): Promise<ApiEnums> {
  cached ??= get<unknown>("/openapi.json")
    .then(enumsFrom)
    .catch(() => {
      cached = null;
      return FALLBACK;
    });
  return cached;
}

export function useApiEnums(): ApiEnums {
  const [enums, setEnums] = useState<ApiEnums>(FALLBACK);
  useEffect(() => {
    let live = true;
    void loadEnums().then((value) => live && setEnums(value));
    return () => {
      live = false;
    };
  }, []);
  return enums;
}
