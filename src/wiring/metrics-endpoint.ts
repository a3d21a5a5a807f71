/**
 * How `/metrics` is protected: HTTPS and the token and access reviews of each scrape, unless
 * `--metrics-secure=false`.
 */
import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { KubeReviews } from "../kube/reviews.ts";
import type { Clock } from "../runtime/clock.ts";
import type { HealthServerOptions } from "../serving/health.ts";
import { MetricsAuthenticator } from "../serving/metrics-auth.ts";
import { DirectoryCertificate, SelfSignedCertificate } from "../serving/serving-cert.ts";
import type { OperatorConfig } from "./operator-config.ts";

/**
 * The certificate and authenticator of `/metrics`, or none when it is served plain or not at
 * all. The reviews go through the operator's own client: its ServiceAccount may create both.
 */
export function metricsProtection(
  config: Pick<OperatorConfig, "metricsSecure" | "metricsBindAddress" | "metricsCertDir">,
  client: KubeClient,
  clock: Clock,
  logger: Logger,
): Pick<HealthServerOptions, "metricsCertificate" | "metricsAuthenticator"> {
  // Without a metrics listener (`--metrics-bind-address=0`) there is nothing to protect.
  if (config.metricsSecure === false || config.metricsBindAddress.trim() === "0") return {};
  return {
    metricsCertificate: config.metricsCertDir
      ? new DirectoryCertificate({ dir: config.metricsCertDir, clock, logger })
      : new SelfSignedCertificate({ clock }),
    metricsAuthenticator: new MetricsAuthenticator({ reviews: new KubeReviews(client), clock, logger }),
  };
}
