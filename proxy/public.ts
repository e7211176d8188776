/**
 * `tool-replay/proxy`, the public entry: the proxy started from code (`startProxy` around an engine
 * session, with the local CA), and a named session on a running `tr-proxy serve`. The shared-proxy test
 * setups are entries of their own (`tool-replay/proxy-node-test`, `tool-replay/proxy-vitest`). The folder's
 * door for sibling folders is `./index.ts`; what is exported here is a decision, pinned by
 * e2e/public-surface.test.ts.
 */

export type {
  CaRejection,
  CertificateAuthority,
  ProxyLimits,
  ProxyServer,
  ProxyServerOptions,
  ProxyStats,
  ReverseMount,
  SessionSpec,
  SharedProxyAddress,
  SharedProxySession,
  UpstreamOptions,
} from './index.ts'
export { caCertPath, loadCertificateAuthority, openSharedSession, parseReverse, SESSION_HEADER, startProxy } from './index.ts'
