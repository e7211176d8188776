/**
 * What Tool Replay's process and the sealed run's helper (namespace-helper.ts) say to each other: the helper's
 * configuration (its one argument, JSON) and the messages on the IPC channel. Types only: the helper imports
 * this file as types, so it still starts with Node's built-ins alone.
 */

/** Absolute paths of the tools the helper runs (found by the parent, where the user's PATH may lack /usr/sbin). */
export interface HelperTools {
  ip: string
  nft: string
  mount: string
  unshare: string
}

/** The helper's configuration. */
export interface HelperConfig {
  tools: HelperTools
  /** Loopback ports inside bridged to the host (`--bridge PORT`). */
  bridgePorts: number[]
  /** An fstab of bind mounts (resolver files, CA bundle) mounted with one `mount -a -T`. */
  fstab?: string
  /** Run the command as this user, in a user namespace of its own (a non-root run: it sees its own uid, no capability). */
  commandUser?: { uid: number; gid: number }
  /** The command; none for a probe (`tr-proxy doctor`): set up, report, exit. */
  command?: string[]
}

/** A listener the helper made inside the namespace; the handle travels with the message. */
export interface ListenerMessage {
  kind: 'listener'
  /** transparent: every redirected TCP connection; proxy: the proxy's port inside (the proxy variables name it); dns-tcp: DNS over TCP on loopback; bridge: `--bridge PORT`. */
  role: 'transparent' | 'proxy' | 'dns-tcp' | 'bridge'
  port: number
  family: 4 | 6
}

/** A UDP socket the helper bound inside the namespace; the handle travels with the message. */
export interface DatagramMessage {
  kind: 'udp'
  /** dns: every DNS query; sink: every other datagram (a miss). */
  role: 'dns' | 'sink'
  port: number
  family: 4 | 6
}

/** The namespace is set up and every handle sent: the helper waits for `go` to start the command. */
export interface ReadyMessage {
  kind: 'ready'
  transparentPort: number
  sinkPort: number
  ipv6: boolean
  /** Time from the helper's start to ready, in ms. */
  setupMs: number
}

/** A step of the set-up failed; the helper exits after sending this. */
export interface FailedMessage {
  kind: 'failed'
  step: 'listen' | 'routes' | 'nft' | 'mount' | 'conntrack' | 'command'
  detail: string
}

export type HelperMessage = ListenerMessage | DatagramMessage | ReadyMessage | FailedMessage

/**
 * The parent's one message: start the command, with Tool Replay's variables added to its environment (the proxy
 * variables point at the proxy listener inside, whose port only the helper knows until it is ready). The helper
 * starts before the proxy does, so the namespace is set up while the session opens.
 */
export interface GoMessage {
  kind: 'go'
  env: Record<string, string>
}

/**
 * The command's values of HELPER_CLEARED_ENV (JSON: name → value, null when unset), kept aside while the helper
 * starts without them, and given back to the command.
 */
export const COMMAND_ENV_ENV = 'TOOL_REPLAY_SEAL_COMMAND_ENV'

/**
 * What the helper starts without: an app's preloads (NODE_OPTIONS), Node 22's env-proxy agent (NODE_USE_ENV_PROXY
 * loads undici and prints a warning), extra CA files read at start. The command gets them back.
 */
export const HELPER_CLEARED_ENV = ['NODE_OPTIONS', 'NODE_USE_ENV_PROXY', 'NODE_EXTRA_CA_CERTS'] as const
