// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux

/// Kernel constants, named as the Linux headers name them (through CLinux), for the modules that must not import C
/// headers of their own.
public enum Kernel {
    /// Link flags (IFF_*).
    public static let interfaceUp = UInt32(NP_IFF_UP)
    /// The link has carrier (IFF_LOWER_UP).
    public static let interfaceLowerUp = UInt32(NP_IFF_LOWER_UP)
    /// inotify events that change a directory's entries or the directory itself.
    public static let directoryChanges = UInt32(NP_IN_DIRECTORY_CHANGES)
}

/// epoll event bits, as the loop's I/O sources report them.
public enum IOEvents {
    public static let readable = UInt32(NP_EPOLLIN)
    public static let writable = UInt32(NP_EPOLLOUT)
    public static let error = UInt32(NP_EPOLLERR)
    public static let hangup = UInt32(NP_EPOLLHUP)
}
