/** Types of scripts/folders.mjs (plain JavaScript so the test runner and the layer check load it without a build). */
export declare const FLOORS: readonly (readonly string[])[]
export declare const PACKAGE_FOLDERS: readonly string[]
export declare const OUTSIDE: readonly string[]
export declare const CHECKED_OUTSIDE: readonly string[]
