/** Where trace files sit in an assets repository: `<dir>/<name>.trace.json`, big bodies in `<dir>/blobs/<sha256>`. */

/** The path of a trace's file in the assets repository. */
export function traceFilePath(dir: string, name: string): string {
  return `${dir}/${name}.trace.json`
}

/** The path of a body kept beside the trace files (content-addressed: shared by every trace and tag that has it). */
export function blobPath(dir: string, digest: string): string {
  return `${dir}/blobs/${digest}`
}
