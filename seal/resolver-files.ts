/**
 * The files a sealed command sees in place of the host's, bind-mounted in its mount namespace only:
 * - /etc/resolv.conf: the nameserver is Tool Replay's, on the namespace's loopback;
 * - /etc/hosts: localhost and this machine's name (loopback: the command's own), nothing else;
 * - /etc/nsswitch.conf: the host's, with `hosts: files dns`, so glibc asks no other source (nss-resolve would ask
 *   systemd-resolved over a Unix socket, mdns avahi) and every name reaches Tool Replay;
 * - the system CA bundle (Debian, Fedora, Alpine paths): the system roots plus the proxy CA, so clients that
 *   ignore SSL_CERT_FILE and friends (Go with its own transport, requests with trust_env=False on Debian) trust
 *   the interception too.
 * One fstab lists them, for one `mount -a -T` inside the namespace.
 */
import { existsSync, readFileSync, realpathSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'

/** System CA bundles replaced when they exist (Debian/Ubuntu, Fedora/RHEL, Alpine/OpenSSL default). */
const SYSTEM_CA_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/cert.pem']

/** resolv.conf: Tool Replay answers on the namespace's loopback port 53. */
export const RESOLV_CONF = '# Tool Replay sealed run: every name is answered by Tool Replay\nnameserver 127.0.0.1\n'

/** /etc/hosts: loopback names only. */
export function hostsFile(name = hostname()): string {
  const own = /^[a-z0-9.-]+$/i.test(name) && name !== 'localhost' ? `127.0.1.1\t${name}\n` : ''
  return `# Tool Replay sealed run\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${own}`
}

/** nsswitch.conf: the host's (users and groups keep their sources), with `hosts: files dns`. */
export function nsswitchFile(host: string | undefined): string {
  const lines = (host ?? '').split('\n').filter((l) => !/^\s*hosts\s*:/.test(l))
  return `${lines.join('\n').trimEnd()}\n# Tool Replay sealed run: names from /etc/hosts, then Tool Replay's DNS only\nhosts: files dns\n`
}

/** An fstab field: spaces, tabs, newlines and backslashes escaped as octal (fstab(5)). */
function fstabField(path: string): string {
  return path.replace(/[\s\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`)
}

/** A bind mount of `source` over `target`, when `target` exists (a bind mount needs one); its real path is used. */
function bindLine(source: string, target: string): string | undefined {
  if (!existsSync(target)) return undefined
  return `${fstabField(source)} ${fstabField(realpathSync(target))} none bind 0 0`
}

/**
 * Writes the replacement files into `dir` and the fstab that mounts them; returns the fstab's path.
 * @example const fstab = await writeResolverFiles(tmp, { caBundle: '/store/ca/bundle.pem' })
 */
export async function writeResolverFiles(dir: string, options: { caBundle?: string; etc?: string } = {}): Promise<string> {
  const etc = options.etc ?? '/etc'
  const files: Array<[string, string, string]> = [
    ['resolv.conf', RESOLV_CONF, join(etc, 'resolv.conf')],
    ['hosts', hostsFile(), join(etc, 'hosts')],
    ['nsswitch.conf', nsswitchFile(readOrUndefined(join(etc, 'nsswitch.conf'))), join(etc, 'nsswitch.conf')],
  ]
  const lines: string[] = []
  for (const [name, text, target] of files) {
    const source = join(dir, name)
    await writeFile(source, text, { mode: 0o644 })
    const line = bindLine(source, target)
    if (line) lines.push(line)
  }
  if (options.caBundle) {
    const targets = new Set(SYSTEM_CA_BUNDLES.filter((t) => existsSync(t)).map((t) => realpathSync(t)))
    for (const target of targets) lines.push(`${fstabField(options.caBundle)} ${fstabField(target)} none bind 0 0`)
  }
  const fstab = join(dir, 'fstab')
  await writeFile(fstab, `${lines.join('\n')}\n`, { mode: 0o644 })
  return fstab
}

function readOrUndefined(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return undefined
  }
}
