/**
 * A setting as a row of a table keyed by its name: its variable, its parser (which holds its
 * bound, also as the JSON schema of its chart value), its default, its help and its chart value;
 * and how a table is read from flags and the environment. The service's rows are in
 * service-settings.ts; the rest of the service's settings (the key and the CA read from files,
 * the proxies) are read in config.ts; `run`'s rows, with the service's, are the table of
 * `commands/settings.ts`.
 *
 * Light: a command's registration (its `--help`) builds the service flags from these rows, so
 * this module loads no HTTP, TLS or client module (config.ts does); keep it so.
 */
import { GO_DURATION, parseDuration } from "./duration.ts";

/** Environment variables as `process.env` holds them. */
export type Env = Readonly<Record<string, string | undefined>>;
// The parsers of the settings' texts: each kind of value has one (see `parsers`), and each says
// its bound as the schema of a chart value. Empty (or null) in the chart: the operator's default.

/** A parser with the schema of its chart value. */
function withSchema<T>(
  parse: (text: string, fallback: string | undefined) => Parsed<T>,
  schema: ValueSchema,
): Parser<T> {
  return Object.assign(parse, { schema });
}

/** Any text, as given. */
const text = withSchema((value: string): Parsed<string> => ({ value }), { type: "string" });

/** A boolean, spelled as {@link parseBool} reads it. */
const boolean = withSchema(
  (value: string): Parsed<boolean> => {
    const b = parseBool(value);
    return typeof b === "boolean" ? { value: b } : { problem: "must be true or false (or 1/0, yes/no)" };
  },
  { type: ["boolean", "null"] },
);

/** `on`/`off`, or a boolean as {@link parseBool} spells it. */
const onOff = withSchema(
  (value: string): Parsed<boolean> => {
    const v = value.trim().toLowerCase();
    const b = v === "on" ? true : v === "off" ? false : parseBool(value);
    return typeof b === "boolean"
      ? { value: b }
      : { problem: `must be on or off, got ${JSON.stringify(value)}` };
  },
  { type: "string", enum: ["", "on", "off"] },
);

/** A number within a range. */
export interface NumberRule {
  integer: boolean;
  min: number;
  max: number;
  /** What it counts, for the problem: `milliseconds`. */
  unit: string;
}

/**
 * A number within `rule`. In the chart, a whole number is an integer; a fraction may be a string
 * too, as `helm --set` types one.
 */
function number(rule: NumberRule): Parser<number> {
  const schema = rule.integer
    ? { type: ["integer", "null"], minimum: rule.min, maximum: rule.max }
    : {
        type: ["number", "string", "null"],
        pattern: "^[0-9]+(\\.[0-9]+)?$",
        minimum: rule.min,
        maximum: rule.max,
      };
  return withSchema<number>((value, fallback) => {
    const n = Number(value.trim());
    if (
      value.trim() === "" ||
      !Number.isFinite(n) ||
      (rule.integer && !Number.isInteger(n)) ||
      n < rule.min ||
      n > rule.max
    ) {
      const kind = rule.integer ? "an integer" : "a number";
      const problem = `must be ${kind} from ${rule.min} to ${rule.max} (${rule.unit}), got ${JSON.stringify(value)}`;
      return { problem: fallback === undefined ? problem : `${problem}; default ${fallback}` };
    }
    return { value: n };
  }, schema);
}

/** A duration in ms, at least `atLeast` (written as a duration) when given. */
function duration(atLeast?: string): Parser<number> {
  const min = atLeast === undefined ? 0 : (parseDuration(atLeast) ?? 0);
  return withSchema<number>(
    (value, fallback) => {
      const ms = parseDuration(value);
      if (ms === undefined)
        return { problem: `${JSON.stringify(value)} is not a duration; use e.g. ${fallback ?? "30s"}` };
      return ms < min ? { problem: `must be at least ${atLeast}` } : { value: ms };
    },
    { type: "string", pattern: `^$|${GO_DURATION.source}` },
  );
}

/** One of `choices`, exactly as written. */
function oneOf<const C extends readonly string[]>(choices: C): Parser<C[number]> {
  return withSchema<C[number]>(
    (value) =>
      choices.includes(value) ? { value: value as C[number] } : { problem: `one of ${choices.join(", ")}` },
    { type: "string", enum: ["", ...choices] },
  );
}

/** Comma-separated namespace names (blanks dropped); empty: none. In the chart, a list. */
const namespaceList = withSchema(
  (value: string): Parsed<string[]> => {
    const names = value
      .split(",")
      .map((n) => n.trim())
      .filter((n) => n !== "");
    const bad = names.find((n) => !isNamespaceName(n));
    return bad === undefined
      ? { value: names }
      : { problem: `${JSON.stringify(bad)} is not a namespace name` };
  },
  {
    type: "array",
    items: { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", maxLength: 63 },
    uniqueItems: true,
  },
);

/** The parser of each kind of setting value, for the rows of a {@link Settings} table. */
export const parsers = { text, boolean, onOff, number, duration, oneOf, namespaceList } as const;

/**
 * What a setting's parser makes of its text: the value, or a problem, said after the setting's
 * flag and variable (`--poll-interval / DMS_POLL_INTERVAL: must be at least 1s`).
 */
export type Parsed<T> = { value: T } | { problem: string };

/**
 * One setting of a command, as a row of a table keyed by the setting's name. Its flag is the
 * name's long form (`pollInterval` is `--poll-interval`, which commander reads back into
 * `pollInterval`); its variable is `env`. A given flag wins over the variable, which wins over the
 * default (see {@link pickSetting}); a switch (a flag without a value, like `--leader-elect`)
 * gives its boolean as is.
 */
export interface Setting<T> {
  /** The environment variable, if the setting has one. */
  env?: string;
  /** The value of a text, within the setting's bound (see {@link Parser}). */
  parse: Parser<T>;
  /** The default as a user writes it, parsed like a given text. None: the setting is unset. */
  default?: string;
  /** The setting must be given; this is an example of a value. */
  required?: string;
  /** For the help: the value's placeholder (`<duration>`); none for a switch. */
  arg?: string;
  /** For the help: what the setting is. */
  help?: string;
  /** For the help: the default as said there, when not its text (`all`, `on`). */
  shown?: string;
  /** How the Helm chart passes it (see {@link ChartValue}). */
  chart?: ChartValue;
}

/**
 * How a setting's text is read: its value, or a problem; `fallback` is the default's text, for
 * problems that name it. `schema`, when the parser has one, is the JSON schema of the setting's
 * chart value (`config.<name>` in values.schema.json): the same bound, as helm checks it.
 */
export interface Parser<T> {
  (text: string, fallback: string | undefined): Parsed<T>;
  readonly schema?: ValueSchema;
}

/** A JSON schema, as values.schema.json holds one per value. */
export type ValueSchema = Readonly<Record<string, unknown>>;

/**
 * How the Helm chart (charts/dms-operator) passes a setting: `"config"`, by the value
 * `config.<name>`, which the chart renders as the setting's variable; `{ config, deprecated }`,
 * the same under another name (and an older one, still read); `{ value }`, through another value
 * of the chart (`leaderElection.enabled`, the credentials Secret); `{ none }`, why a pod has no
 * use for it.
 */
export type ChartValue =
  | "config"
  | { config: string; deprecated?: string }
  | { value: string }
  | { none: string };

/** A table of settings, keyed by name. */
export type Settings = Record<string, Setting<unknown>>;

/** The values a table of settings reads to: unset only where a setting has no default. */
export type SettingValues<S extends Settings> = {
  [K in keyof S]: ValueOf<S[K]> | (S[K] extends { default: string } ? never : undefined);
};
type ValueOf<S> = S extends { parse: (...args: never[]) => infer P }
  ? P extends { value: infer T }
    ? T
    : never
  : never;

/**
 * Reads every setting of `table` from `flags` and `env`, in the table's order. A problem is one
 * line naming the flag and the variable; the setting then takes its default, so that the other
 * settings' rules can still be checked. `given` holds the texts a user gave.
 */
export function readSettings<S extends Settings>(
  table: S,
  flags: object,
  env: Env,
): { values: SettingValues<S>; given: Partial<Record<keyof S, string>>; problems: string[] } {
  const values: Record<string, unknown> = {};
  const given: Record<string, string> = {};
  const problems: string[] = [];
  for (const [key, setting] of Object.entries(table)) {
    const flag = (flags as Record<string, unknown>)[key];
    if (typeof flag === "boolean") {
      values[key] = flag;
      continue;
    }
    const fromFlag = typeof flag === "string" || typeof flag === "number" ? flag : undefined;
    const text = pickSetting(fromFlag, setting.env === undefined ? undefined : env[setting.env]);
    if (text !== undefined) given[key] = text;
    else if (setting.required !== undefined)
      problems.push(`${settingName(key, setting.env)}: required, e.g. ${setting.required}`);
    const parsed = text === undefined ? undefined : setting.parse(text, setting.default);
    if (parsed && "value" in parsed) values[key] = parsed.value;
    else {
      if (parsed) problems.push(`${settingName(key, setting.env)}: ${parsed.problem}`);
      values[key] = defaultOf(setting);
    }
  }
  return { values: values as SettingValues<S>, given: given as Partial<Record<keyof S, string>>, problems };
}

/** A setting's default value: its default text parsed (undefined when it has none). */
export function defaultOf<T>(setting: Setting<T>): T | undefined {
  if (setting.default === undefined) return undefined;
  const parsed = setting.parse(setting.default, setting.default);
  if ("problem" in parsed)
    throw new Error(`the default ${setting.default} does not parse: ${parsed.problem}`);
  return parsed.value;
}

/** How problems name a setting: its flag, and its variable when it has one. */
export function settingName(key: string, env: string | undefined): string {
  return env === undefined ? flagOf(key) : `${flagOf(key)} / ${env}`;
}

/** The help line of a setting: what it is, its default, its variable. */
export function settingHelp(setting: Setting<unknown>): string {
  const shown = setting.shown ?? setting.default;
  return [
    setting.help ?? "",
    shown ? `(default ${shown})` : "",
    setting.env === undefined ? "" : `(env ${setting.env})`,
  ]
    .filter((part) => part !== "")
    .join(" ");
}

/**
 * The text of a setting: the flag when given (a given empty flag counts, so it is reported as
 * invalid rather than silently replaced), else the environment variable unless unset or empty.
 * Boolean flags are not text and fall through to the environment.
 */
export function pickSetting(
  flag: string | number | boolean | undefined,
  fromEnv: string | undefined,
): string | undefined {
  if (flag !== undefined && typeof flag !== "boolean") return String(flag);
  return fromEnv === undefined || fromEnv === "" ? undefined : fromEnv;
}

/**
 * A boolean setting's text: true for `true`/`1`/`yes`, false for `false`/`0`/`no` (any case,
 * trimmed), undefined when not given, null when it is none of those.
 */
export function parseBool(value: string | undefined): boolean | undefined | null {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  if (["true", "1", "yes"].includes(v)) return true;
  if (["false", "0", "no"].includes(v)) return false;
  return null;
}

/** Whether `value` is a Kubernetes namespace name (a DNS-1123 label: at most 63 of a-z, 0-9, '-'). */
export function isNamespaceName(value: string): boolean {
  return value.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(value);
}

/** A setting's option as commander takes it: `--concurrency <n>`, or `--leader-elect` for a switch. */
export function settingFlag(key: string, setting: Setting<unknown>): string {
  return setting.arg === undefined ? flagOf(key) : `${flagOf(key)} ${setting.arg}`;
}

/** The long flag of a setting, e.g. `--base-url` for `baseUrl`. */
export function flagOf(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}
