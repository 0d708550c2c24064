/** The baobab: a wide crown on a thick trunk (an SVG, so it needs no emoji font). */
export function Logo({ size = 20 }: { size?: number }) {
  return (
    <svg width={size} height={size} viewBox="0 0 24 24" aria-hidden="true" focusable="false">
      <ellipse cx="12" cy="7" rx="10" ry="5" fill="#5fae7a" />
      <path d="M9 10.5h6l-1 11.5h-4z" fill="#a87a4a" />
    </svg>
  );
}
