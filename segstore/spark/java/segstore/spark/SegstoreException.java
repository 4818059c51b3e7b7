package segstore.spark;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * An error the segstore library raised in a Python worker (its class name and message, which
 * reads {@code path:pos: what was expected, what was found}), or a failure to reach the workers.
 */
public final class SegstoreException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The Python class of the error ({@code NotFoundError}, {@code ConfigError}...), or null. */
    private final String type;

    SegstoreException(String type, String message) {
        super(type == null ? message : type + ": " + message);
        this.type = type;
    }

    SegstoreException(String message, Throwable cause) {
        super(message, cause);
        this.type = null;
    }

    static SegstoreException fromWorker(JsonNode error) {
        return new SegstoreException(error.path("type").asText(null), error.path("message").asText(""));
    }

    public String type() {
        return type;
    }
}
