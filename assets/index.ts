/** Shared recordings in a git assets repository: the pointer file, the local cache, restore, push and status. */

export type { AssetRepo } from './asset-cache.ts'
/** The cache folder (TOOL_REPLAY_ASSETS_CACHE, XDG cache) and a remote's repository in it. */
export { cacheRepoPaths, defaultAssetsCacheDir, withAssetRepo } from './asset-cache.ts'
/** The inter-process lock cache repositories are used under. */
export { DEFAULT_LOCK_TIMEOUT_MS, withFileLock } from './cache-lock.ts'
export type { GitOptions, GitResult } from './git.ts'
/** Runs the real git: bounded, never prompting, failures as TR_ASSETS_GIT_FAILED. */
export { git } from './git.ts'
export type { AssetsPointer } from './pointer.ts'
/** The pointer file (`tool-replay.assets.json`): parse, format, read, write. */
export { DEFAULT_ASSETS_DIR, DEFAULT_TAG_PREFIX, formatPointer, POINTER_FILE, POINTER_FORMAT, parsePointer, readPointer, writePointer } from './pointer.ts'
export type { PushFinding, PushOptions, PushResult } from './push.ts'
/** Exports, scans and pushes traces under a new tag, then updates the pointer. */
export { pushAssets } from './push.ts'
export type { RestoreOptions, RestoreResult } from './restore.ts'
/** Fetches the pinned traces (shallow, sparse) into the cache and imports them into the store. */
export { restoreAssets } from './restore.ts'
export type { AssetsStatus, StatusOptions, TraceAssetState } from './status.ts'
/** What differs between the pointer, the store and the cache. */
export { assetsStatus } from './status.ts'
