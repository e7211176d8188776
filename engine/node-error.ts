import type { RecordedError } from '../trace/index.ts'

/** A recorded failure as the Error Node's networking gives: message plus `code` (and errno-style fields). */
export function toNodeError(recorded: RecordedError): Error & { code: string } {
  const err = new Error(recorded.message) as Error & { code: string; syscall?: string }
  err.code = recorded.code
  if (recorded.code.startsWith('UND_ERR')) err.name = 'UndiciError'
  else {
    // Node's system errors name the failed call first ("read ECONNRESET", "getaddrinfo ENOTFOUND host").
    const syscall = /^(connect|read|write|getaddrinfo) /.exec(recorded.message)?.[1]
    if (syscall) err.syscall = syscall
    else if (recorded.phase === 'connect') err.syscall = 'connect'
  }
  return err
}
