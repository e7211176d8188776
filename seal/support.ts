/**
 * Whether a sealed run can be set up on this machine, and, when it cannot, why and how to fix it: the checks
 * `tr-proxy doctor` lists, the ones a sealed run makes before it starts, and the reading of a refusal that only
 * shows when it is tried (a container's seccomp profile, AppArmor). Sealing is never skipped: every cause ends
 * in a typed error (TR_SEAL_UNAVAILABLE) that names it and its fix.
 */
import { accessSync, constants, existsSync, readFileSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import type { FailedMessage, HelperTools } from './helper-protocol.ts'

/** Set to `refuse` to make a sealed run's `unshare` fail as a kernel refusal does (tests of the failure path). */
export const SEAL_SIMULATE_ENV = 'TOOL_REPLAY_SEAL_SIMULATE'

/** One check, as `tr-proxy doctor` prints it. */
export interface SealCheck {
  name: string
  ok: boolean
  /** What was found. */
  detail: string
  /** How to fix it, when not ok. */
  fix?: string
}

/** What a sealed run needs found on this machine, and the checks that passed or failed. */
export interface SealSupport {
  ok: boolean
  checks: SealCheck[]
  /** The tools' absolute paths (when every one was found). */
  tools: HelperTools | undefined
  /** True when the run needs an unprivileged user namespace (not root). */
  unprivileged: boolean
}

/** Where each tool comes from (Debian package), for the fix line. */
const TOOL_PACKAGES: Record<keyof HelperTools, string> = { unshare: 'util-linux', mount: 'mount', ip: 'iproute2', nft: 'nftables' }
/** The sbin folders: a non-root user's PATH often lacks them, and ip and nft live there. */
const SBIN = ['/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin', '/bin']

/** The first executable `name` on PATH (then the sbin folders); undefined when there is none. */
export function findExecutable(name: string, path = process.env.PATH ?? ''): string | undefined {
  if (name.includes('/')) return isExecutable(name) ? name : undefined
  for (const dir of [...path.split(delimiter).filter(Boolean), ...SBIN]) {
    const file = join(dir, name)
    if (isExecutable(file)) return file
  }
  return undefined
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

function readSysctl(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim()
  } catch {
    return undefined
  }
}

/**
 * The checks that need no namespace (fast: a few files read): the platform, the tools, and for a non-root user
 * the sysctls that disable unprivileged user namespaces. `tr-proxy doctor` then tries a real set-up.
 */
export function sealSupport(options: { platform?: NodeJS.Platform; uid?: number; root?: string } = {}): SealSupport {
  const platform = options.platform ?? process.platform
  const checks: SealCheck[] = []
  if (platform !== 'linux') {
    checks.push({
      name: 'platform',
      ok: false,
      detail: `${platform}: sealed runs use Linux namespaces`,
      fix: 'run the command in a Linux container or VM (e.g. `docker run --cap-add SYS_ADMIN --cap-add NET_ADMIN ...`), or run it unsealed',
    })
    return { ok: false, checks, tools: undefined, unprivileged: false }
  }
  checks.push({ name: 'platform', ok: true, detail: 'linux' })
  const uid = options.uid ?? process.getuid?.() ?? 0
  const unprivileged = uid !== 0
  const tools: Partial<HelperTools> = {}
  for (const name of Object.keys(TOOL_PACKAGES) as Array<keyof HelperTools>) {
    const found = findExecutable(name)
    if (found) tools[name] = found
    checks.push(
      found
        ? { name, ok: true, detail: found }
        : { name, ok: false, detail: 'not found on PATH or in /usr/sbin', fix: `install it: \`sudo apt-get install ${TOOL_PACKAGES[name]}\` (Debian/Ubuntu)` },
    )
  }
  if (unprivileged) checks.push(...userNamespaceChecks(options.root ?? ''))
  else checks.push({ name: 'user namespaces', ok: true, detail: 'not needed: running as root' })
  const ok = checks.every((c) => c.ok)
  return { ok, checks, tools: ok ? (tools as HelperTools) : undefined, unprivileged }
}

/** The sysctls that keep a non-root user from creating a user namespace. */
function userNamespaceChecks(root: string): SealCheck[] {
  const checks: SealCheck[] = []
  const clone = readSysctl(`${root}/proc/sys/kernel/unprivileged_userns_clone`)
  if (clone === '0') {
    checks.push({
      name: 'user namespaces',
      ok: false,
      detail: 'kernel.unprivileged_userns_clone=0: unprivileged user namespaces are disabled',
      fix: 'enable them: `sudo sysctl -w kernel.unprivileged_userns_clone=1`, or run as root (`sudo`)',
    })
  }
  const max = readSysctl(`${root}/proc/sys/user/max_user_namespaces`)
  if (max === '0') {
    checks.push({
      name: 'user namespaces',
      ok: false,
      detail: 'user.max_user_namespaces=0: no user namespace may be created',
      fix: 'allow them: `sudo sysctl -w user.max_user_namespaces=15000`, or run as root (`sudo`)',
    })
  }
  if (readSysctl(`${root}/proc/sys/kernel/apparmor_restrict_unprivileged_userns`) === '1') {
    checks.push({
      name: 'AppArmor',
      ok: false,
      detail: 'kernel.apparmor_restrict_unprivileged_userns=1: AppArmor takes every capability from unprivileged user namespaces (Ubuntu 23.10 and later)',
      fix: 'allow them: `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor profile granting `userns` to node), or run as root (`sudo`)',
    })
  }
  if (checks.length === 0) checks.push({ name: 'user namespaces', ok: true, detail: 'unprivileged user namespaces allowed' })
  return checks
}

const PREFIX = 'Failed to seal the command'
const NEVER_UNSEALED =
  'A sealed run never falls back to an unsealed one; drop --sealed to run unsealed (clients that ignore the proxy variables then reach the network).'

/** Throws TR_SEAL_UNAVAILABLE when a check that needs no namespace fails; returns what was found. */
export function assertSealable(): SealSupport & { tools: HelperTools } {
  const support = sealSupport()
  if (!support.ok || !support.tools) throw unsupportedError(support)
  return support as SealSupport & { tools: HelperTools }
}

/** The typed error for a failed check. */
export function unsupportedError(support: SealSupport): ToolReplayError {
  const failed = support.checks.filter((c) => !c.ok)
  const causes = failed.map((c) => `${c.name}: ${c.detail}. Fix: ${c.fix ?? 'see `tr-proxy doctor`'}.`).join(' ')
  return new ToolReplayError(ErrorCodes.SEAL_UNAVAILABLE, `${PREFIX}: ${causes} ${NEVER_UNSEALED}`, { details: { checks: failed } })
}

/** True when this process runs in a container (Docker, Podman, Kubernetes), whose defaults refuse namespaces. */
function inContainer(root = ''): boolean {
  if (existsSync(`${root}/.dockerenv`) || existsSync(`${root}/run/.containerenv`) || process.env.container !== undefined) return true
  const cgroup = readSysctl(`${root}/proc/1/cgroup`) ?? ''
  return /docker|kubepods|containerd|libpod/.test(cgroup)
}

/**
 * The typed error for a set-up that failed when tried: `unshare` refused (its stderr), or a step of the helper
 * failed (its message), read with what this machine is known to be.
 */
export function refusalError(failure: { stderr: string } | FailedMessage, support: Pick<SealSupport, 'unprivileged'>): ToolReplayError {
  let cause: string
  let fix: string
  if ('stderr' in failure) {
    const said = failure.stderr.trim().split('\n').slice(-3).join(' ') || '(no message)'
    cause = `the kernel refused to create the run's namespaces (unshare said: ${said})`
    if (inContainer()) {
      fix =
        'this looks like a container, whose default seccomp profile and capabilities refuse namespaces: start it with `--cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined` (or `--privileged`)'
    } else if (support.unprivileged) {
      fix =
        'allow unprivileged user namespaces (`sudo sysctl -w kernel.unprivileged_userns_clone=1`, `sudo sysctl -w user.max_user_namespaces=15000`, and on Ubuntu `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`), or run as root (`sudo`)'
    } else fix = 'run with CAP_SYS_ADMIN and CAP_NET_ADMIN (as root outside a restricted container)'
  } else {
    const steps: Record<FailedMessage['step'], [string, string]> = {
      listen: ['a listener could not be bound inside the namespace', 'report it with the message above'],
      routes: ['`ip` could not route every destination to loopback inside the namespace', 'check that iproute2 works (`ip -V`)'],
      nft: [
        '`nft` could not load the redirect rules',
        'the kernel needs nf_tables with NAT and redirect: `sudo modprobe nf_tables nft_redir nf_conntrack` (package nftables for the tool)',
      ],
      mount: ['the resolver files could not be bind-mounted', 'check that util-linux `mount` works inside `unshare --mount`'],
      conntrack: [
        'the connection-tracking table (/proc/<pid>/net/nf_conntrack) cannot be read',
        'load it with `sudo modprobe nf_conntrack` (the kernel needs CONFIG_NF_CONNTRACK_PROCFS)',
      ],
      command: ['the command could not be started inside the namespace', 'check that it is installed and on PATH'],
    }
    const [what, how] = steps[failure.step]
    cause = `${what} (${failure.detail})`
    fix = how
  }
  return new ToolReplayError(ErrorCodes.SEAL_UNAVAILABLE, `${PREFIX}: ${cause}. Fix: ${fix}. ${NEVER_UNSEALED}`, { details: { failure } })
}
