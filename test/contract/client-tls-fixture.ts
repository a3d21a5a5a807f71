/**
 * A self-signed certificate for 127.0.0.1 (EC P-256, valid until 2126), made for the TLS tests
 * with `openssl req -x509 -newkey ec ... -addext subjectAltName=IP:127.0.0.1`. Test-only: it
 * protects nothing and must never be trusted anywhere else.
 */
export const SELF_SIGNED = {
  cert: `-----BEGIN CERTIFICATE-----
MIIBkDCCATagAwIBAgIUfSyzE66EiDZcKoAN5m7Esi1Pd/swCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTEyMjA0NDcyMFoYDzIxMjYxMDI5
MDQ0NzIwWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAATGZ6rPg985eLgvNyyN6tjQtQ2FwRPL2RblcPzBBjZr77KbARvZBLlk
XLOJV9jBltFJDAJYDqYJin5c4gZh9NZdo2QwYjAdBgNVHQ4EFgQUNGIuSGrOwws7
p2zkgIOuR1OFNtUwHwYDVR0jBBgwFoAUNGIuSGrOwws7p2zkgIOuR1OFNtUwDwYD
VR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49BAMCA0gAMEUC
IQDvC2aciraiuC2k4VpmJBhCnQa5pCBIrBoPkUNpu42AHwIgHA0+S3ylnALYlUCd
ZyFhl9+V1lLsmf8PyADMksFEjko=
-----END CERTIFICATE-----
`,
  key: `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgtklV9B1uCzkqxVhq
lBr19nuS239mCf9McFkWFbz2nEqhRANCAATGZ6rPg985eLgvNyyN6tjQtQ2FwRPL
2RblcPzBBjZr77KbARvZBLlkXLOJV9jBltFJDAJYDqYJin5c4gZh9NZd
-----END PRIVATE KEY-----
`,
};
