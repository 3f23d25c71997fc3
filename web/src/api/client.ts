// The typed client of /v2, generated from the committed openapi.yaml (npm run gen), plus the
// session routes, which are not part of /v2.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema";

export type Schemas = components["schemas"];

export const api = createClient<paths>({ baseUrl: window.location.origin, credentials: "same-origin" });

/** Unauthorized is a 401: the app shows the sign-in page. */
export class Unauthorized extends Error {}

/** APIError carries the error envelope's message, or a validation failure's details. */
export class APIError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

type Result<T> = { data?: T; error?: unknown; response: Response };

/** ok unwraps an openapi-fetch result: the data, or a thrown Unauthorized or APIError. */
export async function ok<T>(p: Promise<Result<T>>): Promise<T> {
  const { data, error, response } = await p;
  if (response.status === 401) throw new Unauthorized("sign in");
  if (error !== undefined || data === undefined) throw new APIError(describe(error, response), response.status);
  return data;
}

function describe(error: unknown, response: Response): string {
  const e = error as { error?: { message?: string }; detail?: string; errors?: { message?: string; location?: string }[] } | undefined;
  if (e?.error?.message) return e.error.message;
  if (e?.errors?.length) return e.errors.map((x) => `${x.location ?? ""}: ${x.message ?? ""}`).join("; ");
  return e?.detail ?? `${response.status} ${response.statusText}`;
}

/** signIn exchanges an API key for a session cookie (POST /auth/session). */
export async function signIn(apiKey: string): Promise<void> {
  const r = await fetch("/auth/session", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ api_key: apiKey }),
  });
  if (!r.ok) {
    const body = (await r.json().catch(() => undefined)) as { error?: { message?: string } } | undefined;
    throw new APIError(body?.error?.message ?? `sign in failed (${r.status})`, r.status);
  }
}

/** signOut ends the session (DELETE /auth/session). */
export async function signOut(): Promise<void> {
  await fetch("/auth/session", { method: "DELETE", credentials: "same-origin" });
}
