import { Link } from "react-router";

import type { FusedGroup } from "../api/types";

interface Props {
  group: FusedGroup;
  /** The job's trials live under /jobs/<app>/<version>/trials/<id>. */
  app: string;
  version: number;
}

/** "fused ×K": the trial trained in one process with K - 1 others; links to the group's first trial, whose page lists them all. */
export function FusedBadge({ group, app, version }: Props) {
  return (
    <Link
      className="badge badge-neutral fused"
      to={`/jobs/${encodeURIComponent(app)}/${version}/trials/${group.id}`}
      title={`trained in one process with the ${group.size} trials of fused group ${group.id}`}
    >
      fused ×{group.size}
    </Link>
  );
}
