// The only file that calls libkeyutils. Each `system_` trampoline is one C call;
// `keyctlResult` turns its -1/errno convention into a Result and retries EINTR.

internal import CKeyutils
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs `call` until it returns something other than -1/EINTR.
@inline(__always)
internal func keyctlResult<I: FixedWidthInteger>(_ call: () -> I) -> Result<I, Errno> {
    while true {
        let result = call()
        if result != -1 { return .success(result) }
        let error = Errno(rawValue: errno)
        if error != .interrupted { return .failure(error) }
    }
}

internal func system_add_key(
    _ type: UnsafePointer<CChar>, _ description: UnsafePointer<CChar>,
    _ payload: UnsafeRawPointer?, _ length: Int, _ keyring: Int32
) -> Int32 {
    add_key(type, description, payload, length, keyring)
}

internal func system_keyctl_search(
    _ keyring: Int32, _ type: UnsafePointer<CChar>, _ description: UnsafePointer<CChar>, _ destination: Int32
) -> Int {
    keyctl_search(keyring, type, description, destination)
}

internal func system_keyctl_read(_ key: Int32, _ buffer: UnsafeMutableRawPointer?, _ length: Int) -> Int {
    keyctl_read(key, buffer?.assumingMemoryBound(to: CChar.self), length)
}

internal func system_keyctl_describe(_ key: Int32, _ buffer: UnsafeMutablePointer<CChar>?, _ length: Int) -> Int {
    keyctl_describe(key, buffer, length)
}

internal func system_keyctl_setperm(_ key: Int32, _ permissions: UInt32) -> Int {
    keyctl_setperm(key, permissions)
}

internal func system_keyctl_chown(_ key: Int32, _ uid: UInt32, _ gid: UInt32) -> Int {
    keyctl_chown(key, uid, gid)
}

internal func system_keyctl_update(_ key: Int32, _ payload: UnsafeRawPointer?, _ length: Int) -> Int {
    keyctl_update(key, payload, length)
}

internal func system_keyctl_set_timeout(_ key: Int32, _ seconds: UInt32) -> Int {
    keyctl_set_timeout(key, seconds)
}

internal func system_keyctl_link(_ key: Int32, _ keyring: Int32) -> Int {
    keyctl_link(key, keyring)
}

internal func system_keyctl_unlink(_ key: Int32, _ keyring: Int32) -> Int {
    keyctl_unlink(key, keyring)
}

internal func system_keyctl_move(_ key: Int32, _ from: Int32, _ to: Int32, _ flags: UInt32) -> Int {
    keyctl_move(key, from, to, flags)
}

internal func system_keyctl_invalidate(_ key: Int32) -> Int {
    keyctl_invalidate(key)
}

internal func system_keyctl_clear(_ keyring: Int32) -> Int {
    keyctl_clear(keyring)
}

internal func system_keyctl_get_keyring_ID(_ key: Int32, _ create: Bool) -> Int32 {
    keyctl_get_keyring_ID(key, create ? 1 : 0)
}

internal func system_keyctl_get_persistent(_ uid: UInt32, _ keyring: Int32) -> Int {
    keyctl_get_persistent(uid, keyring)
}

internal func system_keyctl_join_session_keyring(_ name: UnsafePointer<CChar>?) -> Int32 {
    keyctl_join_session_keyring(name)
}

internal func system_disable_dumping() -> Int32 {
    CKeyutils_disable_dumping()
}

internal func system_disable_crash_reports() -> Int32 {
    CKeyutils_disable_crash_reports()
}

internal let system_KEYCTL_MOVE_EXCL: UInt32 = UInt32(KEYCTL_MOVE_EXCL)
