public import SystemPackage
import KernelKeychain

/// A filesystem failure as the errno a shell user will see.
public struct FilesystemError: Error, Hashable, Sendable {
    public var errno: Errno
    public init(_ errno: Errno) { self.errno = errno }

    /// EFBIG for a value over 32767 bytes, EDQUOT for the key quota, EINVAL for an
    /// empty value, EACCES for the kernel's refusals, ENAMETOOLONG for long names.
    public init(_ error: KeychainError) {
        switch error {
        case .invalidName(_, let problem):
            if case .tooLong = problem { self.init(.fileNameTooLong) } else { self.init(.invalidArgument) }
        case .emptyValue, .invalidTimeout, .serviceRequired:
            self.init(.invalidArgument)
        case .valueTooLarge:
            self.init(.fileTooLarge)
        case .accessDenied:
            self.init(.permissionDenied)
        case .quotaExceeded, .notEnoughQuota:
            self.init(.diskQuotaExceeded)
        case .keyringsUnavailable:
            self.init(.noFunction)
        case .unreachableFromUserNamespace:
            self.init(.notSupported)
        case .decodingFailed:
            self.init(.ioError)
        case .kernel(let underlying):
            self.init(underlying.errno)
        case .unknownGroup, .unknownUser, .noSuchService, .notShared, .sharedServiceGone:
            self.init(.noSuchFileOrDirectory)
        case .notInGroup, .sharedReadOnly, .ownerOnly, .sessionOfAnotherUser:
            self.init(.permissionDenied)
        case .alreadyExists:
            self.init(.fileExists)
        case .sharedByMany, .sharedWithAnotherGroup:
            self.init(.invalidArgument)
        // The vault: a locked or unsafe vault refuses; a damaged file is an I/O error.
        case .vaultLocked, .vaultNotUnlockedOnThisMachine, .vaultUnsafe, .cannotSwitchUser:
            self.init(.permissionDenied)
        case .vaultNotInitialized:
            self.init(.noSuchFileOrDirectory)
        case .vaultAlreadyExists:
            self.init(.fileExists)
        case .wrongPassphrase, .weakPassphrase, .invalidWorkFactor:
            self.init(.invalidArgument)
        case .vaultIOFailed, .vaultNotSaved, .vaultCrypto:
            self.init(.ioError)
        }
    }
}
