// LocalizedError lives in FoundationEssentials (swift-foundation), so conforming to it
// does not pull full Foundation into programs that import KernelKeychain.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension KeychainError: LocalizedError {
    /// The one-line ``description`` (the cause, then what to do), so
    /// `error.localizedDescription` and anything else that shows a Foundation error
    /// (an alert, a log line) carries the message instead of
    /// "The operation could not be completed. (KernelKeychain.KeychainError error 18.)".
    public var errorDescription: String? { description }
}
