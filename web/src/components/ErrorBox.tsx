/** An error that belongs to no single field (or to a whole page). */
export function ErrorBox({ message }: { message?: string | null }) {
  if (!message) return null;
  return (
    <div className="error-box" role="alert">
      {message.includes("\n") ? <pre>{message}</pre> : message}
    </div>
  );
}
