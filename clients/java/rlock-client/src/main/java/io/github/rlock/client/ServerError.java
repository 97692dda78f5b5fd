package io.github.rlock.client;

/** A server error reply read as a value, so that one failed command of a pipeline does not hide the others. */
record ServerError(String message) {
  RlockException toException() {
    return Replies.serverError(message);
  }
}
