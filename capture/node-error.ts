import { constants } from 'node:os'
import type { RecordedError } from '../trace/index.ts'

/**
 * A recorded failure as the Error Node's networking gives: message plus `code`, and for system errors the
 * `syscall` and `errno` Node sets (its messages name the failed call first: "read ECONNRESET",
 * "connect ECONNREFUSED 127.0.0.1:1", "getaddrinfo ENOTFOUND host"), so an app that looks at them sees what
 * it saw live.
 */
export function toNodeError(recorded: RecordedError): Error & { code: string } {
  const err = new Error(recorded.message) as Error & { code: string; syscall?: string; errno?: number }
  err.code = recorded.code
  if (recorded.code.startsWith('UND_ERR')) {
    err.name = 'UndiciError'
    return err
  }
  const syscall = new RegExp(`^(\\w+) ${recorded.code}\\b`).exec(recorded.message)?.[1] ?? /^(connect|read|write|getaddrinfo) /.exec(recorded.message)?.[1]
  if (syscall) err.syscall = syscall
  else if (recorded.phase === 'connect') err.syscall = 'connect'
  const errno = (constants.errno as Record<string, number | undefined>)[recorded.code]
  if (syscall && errno !== undefined) err.errno = -errno
  return err
}
