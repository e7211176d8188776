/** Interop: pure conversions between traces and other formats (HAR in and out, MSW handlers out). No I/O. */

export type { HarExportOptions } from './har-export.ts'
export { formatHar, harFromTrace } from './har-export.ts'
export type { Har, HarContent, HarEntry, HarLimits, HarLog, HarNameValue, HarPostData, HarRequest, HarResponse, HarTimings } from './har-format.ts'
export { DEFAULT_HAR_LIMITS } from './har-format.ts'
export type { HarImport, HarImportOptions, SkippedHarEntry } from './har-import.ts'
export { traceFromHar } from './har-import.ts'
export type { MswExportOptions } from './msw-handlers.ts'
export { mswHandlersFromTrace } from './msw-handlers.ts'
