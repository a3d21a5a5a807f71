// Command lines of etcd and kube-apiserver for a single-node control plane on loopback.
import { join } from "node:path";

/** etcd flags for a one-member cluster listening on `clientUrl` and `peerUrl` (both on 127.0.0.1). */
export function etcdArgs(p: { dataDir: string; clientUrl: string; peerUrl: string }): string[] {
  return [
    "--name=default",
    `--data-dir=${p.dataDir}`,
    `--listen-client-urls=${p.clientUrl}`,
    `--advertise-client-urls=${p.clientUrl}`,
    `--listen-peer-urls=${p.peerUrl}`,
    `--initial-advertise-peer-urls=${p.peerUrl}`,
    `--initial-cluster=default=${p.peerUrl}`,
    // Test data: durability against power loss buys nothing and fsync dominates on slow disks.
    "--unsafe-no-fsync",
    "--log-level=warn",
  ];
}

/**
 * kube-apiserver flags, envtest-like. `dir` holds `certs/` (the self-signed serving certificate is
 * generated there on first start and reused on restart), `tokens.csv`, `sa.pub` and `sa.key`.
 * `extra` comes last, so a test can override any default.
 */
export function apiServerArgs(p: { etcdUrl: string; port: number; dir: string; extra: string[] }): string[] {
  const file = (name: string) => join(p.dir, name);
  return [
    `--etcd-servers=${p.etcdUrl}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${p.port}`,
    // Works without a default route; "none" because the kubernetes Endpoints reject a loopback address.
    "--advertise-address=127.0.0.1",
    "--endpoint-reconciler-type=none",
    `--cert-dir=${file("certs")}`,
    "--service-cluster-ip-range=10.0.0.0/24",
    "--authorization-mode=RBAC",
    `--token-auth-file=${file("tokens.csv")}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${file("sa.pub")}`,
    `--service-account-signing-key-file=${file("sa.key")}`,
    // No controller manager creates a `default` ServiceAccount, which this plugin would demand of pods.
    "--disable-admission-plugins=ServiceAccount",
    "--allow-privileged=true",
    "--profiling=false",
    ...p.extra,
  ];
}
