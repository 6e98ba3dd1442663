package batchclient

// UnreadBytes exposes unreadBytes to the external tests.
var UnreadBytes = unreadBytes
