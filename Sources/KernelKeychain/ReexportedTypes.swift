// The types KernelKeychain's public API names that lower modules declare, re-exported so
// that `import KernelKeychain` alone is enough to use that API: a name
// (`KeychainItem.name`, `Keychain.services()`) is a `KeyName`, every keyed method takes
// `some KeyNameConvertible`, `KeychainItem.serial` is a `KeySerial`, and a kernel failure
// carries a `KeyctlError` with its `Errno`.
//
// Keyrings is re-exported whole. Re-exporting its types one by one (`@_exported import
// struct Keyrings.KeyName`) or typealiases lose their operators, since operator lookup
// goes through the module such an import leaves out (`KeyName("kc:") + name` and
// `item.service == service` do not compile), and typealiases lose every member where
// MemberImportVisibility is on. SystemPackage is another package's whole system
// interface, so only its `Errno` comes along (its operators are Equatable's).

@_exported import Keyrings
@_exported import struct SystemPackage.Errno
