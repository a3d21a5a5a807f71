/**
 * `spec.rolloutWindows`, on a Deployment and on both connection kinds (the default of the
 * Deployments that set none): when a change that makes a new revision may roll out. The CRD
 * bounds and shapes each item; the operator reads the schedule with croner and the time zone
 * with `Intl` (`src/reconcile/rollout/rollout-windows.ts`), which a pattern cannot do.
 */
import { type Static, Type } from "@sinclair/typebox";
import { StringEnum } from "./openapi-types.ts";

/** Values of a window's `kind`. */
export const WINDOW_KINDS = ["allow", "deny"] as const;

/** Most windows one list may hold: enough for nights, weekends and a few freezes. */
export const MAX_ROLLOUT_WINDOWS = 16;
/** Longest schedule: five cron fields with lists and ranges. */
export const MAX_SCHEDULE_LENGTH = 128;
/** Longest IANA time zone name (the longest is 32 characters). */
export const MAX_TIME_ZONE_LENGTH = 64;
/** Longest duration text (`8784h`, `1h30m`). */
export const MAX_WINDOW_DURATION_LENGTH = 32;

const RolloutWindowSchema = Type.Object(
  {
    kind: StringEnum(WINDOW_KINDS, {
      description:
        "allow: revisions roll out only inside allow windows (when there is at least one). deny: never inside a deny window, which wins over any allow window.",
    }),
    schedule: Type.String({
      minLength: 1,
      maxLength: MAX_SCHEDULE_LENGTH,
      pattern: "^(@[a-z]+|[^\\s]+(\\s+[^\\s]+){4})$",
      description:
        'When each window starts: a 5-field cron schedule (minute hour day-of-month month day-of-week, e.g. "0 22 * * 1-5") or @hourly, @daily, @weekly, @monthly, @yearly; read in timeZone.',
    }),
    duration: Type.String({
      minLength: 2,
      maxLength: MAX_WINDOW_DURATION_LENGTH,
      pattern: "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$",
      description:
        "How long each window lasts from its start, as a Go duration (1h, 90m, 8h30m); at most 8784h.",
    }),
    timeZone: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_TIME_ZONE_LENGTH,
        pattern: "^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$",
        description: "IANA time zone the schedule is read in (Europe/Berlin, America/New_York). Default UTC.",
      }),
    ),
  },
  { description: "A window: starts at each time of schedule, lasts duration." },
);

/** The list schema; `description` says what the list means where it stands. */
export const rolloutWindowsSchema = (description: string) =>
  Type.Array(RolloutWindowSchema, { maxItems: MAX_ROLLOUT_WINDOWS, description });

/** One item of `spec.rolloutWindows`, as written. */
export type RolloutWindowSpec = Static<typeof RolloutWindowSchema>;
