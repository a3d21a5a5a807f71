// What `run` says at start about settings that leave something open without saying so: a default
// connection every namespace may use, and NO_PROXY entries Node's agents ignore.
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { ServiceConfig } from "../../src/config.ts";
import { warnOfOpenSettings } from "../../src/wiring/service-connections.ts";

/** The warnings logged for `config`, as [fields, message]. */
function warnings(config: Parameters<typeof warnOfOpenSettings>[0]): { msg: string; [k: string]: unknown }[] {
  const lines: { msg: string; level: number }[] = [];
  const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  warnOfOpenSettings(config, logger);
  return lines.filter((l) => l.level === 40);
}

const service = (proxyEnv?: ServiceConfig["proxyEnv"]) =>
  ({ baseUrl: "https://api.example.com", ...(proxyEnv ? { proxyEnv } : {}) }) as ServiceConfig;

describe("warnOfOpenSettings", () => {
  it("says the default connection serves every watched namespace without --default-connection-namespace-selector", () => {
    expect(warnings({ service: service() })).toEqual([
      expect.objectContaining({
        baseUrl: "https://api.example.com",
        msg: expect.stringContaining(
          "the default connection (the operator's own --base-url and API key) serves every watched namespace",
        ),
      }),
    ]);
    const selected = warnings({
      service: service(),
      defaultConnectionNamespaceSelector: {
        text: "team=a",
        selector: [{ key: "team", operator: "In", values: ["a"] }],
      },
    });
    expect(selected).toEqual([]);
  });

  it("names each NO_PROXY entry Node ignores when a proxy is set, with what to write instead", () => {
    const selector = { text: "team=a", selector: [{ key: "team", operator: "In" as const, values: ["a"] }] };
    const logged = warnings({
      service: service({ HTTPS_PROXY: "http://proxy:3128", NO_PROXY: "localhost,10.0.0.0/8,.svc" }),
      defaultConnectionNamespaceSelector: selector,
    });
    expect(logged).toEqual([
      expect.objectContaining({
        variable: "NO_PROXY",
        entry: "10.0.0.0/8",
        msg: 'NO_PROXY entry "10.0.0.0/8" is ignored by Node: calls to those hosts go through the proxy; write the range as 10.0.0.0-10.255.255.255, which Node matches against an IPv4 address in the base URL',
      }),
    ]);
    // Node reads no_proxy before NO_PROXY; without a proxy, NO_PROXY changes nothing.
    const lower = warnings({
      service: service({ HTTPS_PROXY: "http://proxy:3128", no_proxy: "fd00::/8", NO_PROXY: "10.0.0.0/8" }),
      defaultConnectionNamespaceSelector: selector,
    });
    expect(lower.map((l) => [l.variable, l.entry])).toEqual([["no_proxy", "fd00::/8"]]);
    expect(
      warnings({
        service: service({ NO_PROXY: "10.0.0.0/8" }),
        defaultConnectionNamespaceSelector: selector,
      }),
    ).toEqual([]);
  });
});
