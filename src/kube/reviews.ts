/**
 * The API server's TokenReview and SubjectAccessReview, for the `/metrics` filter (its
 * {@link ReviewPort}). Both are `create`-only, cluster-scoped, and write nothing: the API server
 * answers in the returned object's `status`. The operator's ClusterRole grants `create` on both.
 */
import { isRecord } from "../runtime/json.ts";
import {
  type NonResourceAttributes,
  type ReviewedUser,
  type ReviewPort,
  ReviewRefusedError,
} from "../serving/metrics-auth.ts";
import type { KubeClient } from "./client.ts";
import { KubeApiError } from "./errors.ts";

const TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews";
const SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/**
 * {@link ReviewPort} over the operator's own client.
 *
 * Contract: as the port's. A token is authenticated only when the answer says
 * `status.authenticated: true` and names a user; a user is allowed only on `status.allowed: true`
 * (an answer missing either reads as "no"). An HTTP 401/403 to the review itself becomes
 * {@link ReviewRefusedError}; the token is never part of an error message.
 */
export class KubeReviews implements ReviewPort {
  readonly #client: KubeClient;

  constructor(client: KubeClient) {
    this.#client = client;
  }

  async authenticate(token: string, signal: AbortSignal): Promise<ReviewedUser | undefined> {
    const answer = await this.#create(
      TOKEN_REVIEWS,
      { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } },
      signal,
    );
    const status = isRecord(answer) && isRecord(answer.status) ? answer.status : {};
    if (status.authenticated !== true || !isRecord(status.user)) return undefined;
    const { username, uid, groups, extra } = status.user;
    if (typeof username !== "string" || username === "") return undefined;
    return {
      username,
      ...(typeof uid === "string" && uid !== "" ? { uid } : {}),
      groups: strings(groups),
      extra: isRecord(extra)
        ? Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, strings(v)]))
        : {},
    };
  }

  async authorize(
    user: ReviewedUser,
    attributes: NonResourceAttributes,
    signal: AbortSignal,
  ): Promise<{ allowed: boolean; reason?: string }> {
    const answer = await this.#create(
      SUBJECT_ACCESS_REVIEWS,
      {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: {
          user: user.username,
          ...(user.uid ? { uid: user.uid } : {}),
          groups: user.groups,
          extra: user.extra,
          nonResourceAttributes: { path: attributes.path, verb: attributes.verb },
        },
      },
      signal,
    );
    const status = isRecord(answer) && isRecord(answer.status) ? answer.status : {};
    return {
      allowed: status.allowed === true,
      ...(typeof status.reason === "string" && status.reason !== "" ? { reason: status.reason } : {}),
    };
  }

  async #create(path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    try {
      return await this.#client.request({ method: "POST", path, body, signal });
    } catch (err) {
      if (err instanceof KubeApiError && (err.status === 401 || err.status === 403))
        throw new ReviewRefusedError(
          `${err.message} (the operator's ServiceAccount needs create on tokenreviews.authentication.k8s.io and subjectaccessreviews.authorization.k8s.io)`,
          { cause: err },
        );
      throw err;
    }
  }
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}
