interface Props {
  page: number;
  perPage: number;
  total: number;
  onPage: (page: number) => void;
  onPerPage: (perPage: number) => void;
}

export function Pager({ page, perPage, total, onPage, onPerPage }: Props) {
  const pages = Math.max(1, Math.ceil(total / perPage));
  const first = total === 0 ? 0 : (page - 1) * perPage + 1;
  const last = Math.min(total, page * perPage);
  return (
    <nav className="pager" aria-label="pages">
      <button type="button" onClick={() => onPage(1)} disabled={page <= 1} aria-label="first page">
        «
      </button>
      <button type="button" onClick={() => onPage(page - 1)} disabled={page <= 1} aria-label="previous page">
        ‹
      </button>
      <span className="muted">
        {first.toLocaleString()}–{last.toLocaleString()} of {total.toLocaleString()}
      </span>
      <button type="button" onClick={() => onPage(page + 1)} disabled={page >= pages} aria-label="next page">
        ›
      </button>
      <button type="button" onClick={() => onPage(pages)} disabled={page >= pages} aria-label="last page">
        »
      </button>
      <label className="muted small">
        per page{" "}
        <select value={perPage} onChange={(e) => onPerPage(Number(e.target.value))}>
          {[25, 50, 100, 200].map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
      </label>
    </nav>
  );
}
