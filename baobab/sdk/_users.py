"""The client's calls for logging in and managing users (``/tokens``, ``/users``)."""

from __future__ import annotations

from baobab.sdk._transport import Json, Transport

__all__ = ["Users"]


class Users(Transport):
    """Logging in, and users (admins only, but for :meth:`login`)."""

    def login(self, email: str, password: str) -> Json:
        """Trades an email and password for a token, which this client uses from now on.

        Returns:
            ``{"token", "expires_in", "user"}``.
        """
        answer = self._call("POST", "/tokens", json={"email": email, "password": password}, auth=False)
        self.token = answer["token"]
        return answer

    def create_user(self, email: str, password: str, *, role: str) -> Json:
        """Creates a user (admins only); ``role`` is SUPERADMIN, ADMIN, MODEL_DEVELOPER or APP_DEVELOPER."""
        return self._call("POST", "/users", json={"email": email, "password": password, "role": role})

    def list_users(self) -> list[Json]:
        """Every user, oldest first (admins only)."""
        return self._call("GET", "/users")["users"]

    def get_user(self, user_id: int) -> Json:
        return self._call("GET", f"/users/{int(user_id)}")

    def update_user(self, user_id: int, *, role: str | None = None, banned: bool | None = None) -> Json:
        """Changes a user's role and/or ban (admins only); answers the user as it is afterwards."""
        body: Json = {}
        if role is not None:
            body["role"] = role
        if banned is not None:
            body["banned"] = banned
        return self._call("PATCH", f"/users/{int(user_id)}", json=body)

    def ban_user(self, user_id: int) -> Json:
        """Bans a user: their tokens stop working at once (users are never deleted)."""
        return self.update_user(user_id, banned=True)

    def unban_user(self, user_id: int) -> Json:
        return self.update_user(user_id, banned=False)
