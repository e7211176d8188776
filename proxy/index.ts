/** The forward proxy: CONNECT + TLS interception, the local CA, the command wrapper and the control API. */

export type { CaRejection } from './ca-rejection.ts'
export type { CertificateAuthority } from './certificate-authority.ts'
/** Loads (or creates on first use) the CA kept in `<store>/ca/`; paths of the CA inside a store directory. */
export { caCertPath, caDir, loadCertificateAuthority } from './certificate-authority.ts'
export type { CommandExit } from './command-wrapper.ts'
/** Runs a command with extra environment, SIGINT/SIGTERM forwarded; resolves with its exit. */
export { runCommand } from './command-wrapper.ts'
export type { ControlApi, ControlApiOptions, NamedSessionStatus, ServeStatus } from './control-api.ts'
/** The control API of `serve` (status, named sessions) on a Unix socket per serve, its path, and the serves running on a store. */
export { controlSocketPath, getStatus, listServes, startControlApi } from './control-api.ts'
export type { LiveResendOptions, LiveResendResult } from './live-resend.ts'
/** Re-sends recorded requests live through the upstream options and record's redaction (`tr-proxy drift`). */
export { resendLive } from './live-resend.ts'
/** Proxy environment for a child (proxy vars, NO_PROXY cleared, CA files), the CA bundle, and `export` lines. */
export { formatExports, proxyEnvironment, wrappedCommandEnvironment, writeCaBundle } from './proxy-env.ts'
export { DEFAULT_PROXY_LIMITS, type LimitDeclaration, limitHelp, limitsFromFlags, PROXY_LIMITS, type ProxyLimits } from './proxy-limits.ts'
/** The options of a proxy run and of its upstreams, declared once (flags, defaults, help, checks). */
export { DEFAULT_PROXY_PORT, PROXY_OPTIONS, SEALED_OPTIONS, UPSTREAM_OPTIONS } from './proxy-options.ts'
export type { ProxyRunOptions, ProxyRunResult } from './proxy-run.ts'
/** One CLI-style run: session + proxy, then a command through it or serve until a signal. */
export { runProxySession, waitForStop } from './proxy-run.ts'
export type { ProxyServer, ProxyServerOptions, ProxyStats } from './proxy-server.ts'
/** Starts the proxy around a default engine session (or none); its default connection limits. */
export { startProxy } from './proxy-server.ts'
export type { ClosedSession, ProxySessions, SessionRefusal, SessionRefusals } from './proxy-sessions.ts'
export { DEFAULT_CHUNK_GAP_MS } from './response-target.ts'
/** Status and header of the proxy's own error responses (403 refusal, see capture/refusal.ts; 502 upstream failure). */
export { ERROR_HEADER, REFUSED_STATUS, UPSTREAM_FAILED_STATUS } from './responses.ts'
export type { ReverseMount, ReverseRoutes } from './reverse-routes.ts'
/** Parses `--reverse URL` / `--reverse NAME=URL` values into mounts. */
export { parseReverse } from './reverse-routes.ts'
export type { SealedOptions, SealedStart } from './sealed-run.ts'
/** A sealed command started early (its namespace set up while the proxy starts), run through a proxy once it is up. */
export { startSealedCommand } from './sealed-run.ts'
/** How a request names its session: the header (`x-tool-replay-session`), and the rule for session names. */
export { assertSessionName, SESSION_HEADER, SESSION_PASSWORD, sessionNameFrom } from './session-choice.ts'
export type { SessionSpec } from './session-spec.ts'
export type { SharedProxyAddress, SharedProxySession } from './shared-session.ts'
/** A named session on a running serve (opened through its control API), and raw control API calls. */
export { controlCall, openSharedSession } from './shared-session.ts'
export type { UpstreamOptions } from './upstream.ts'
/** Parses `--resolve host=ip:port` values into a host map. */
export { parseResolve } from './upstream.ts'
