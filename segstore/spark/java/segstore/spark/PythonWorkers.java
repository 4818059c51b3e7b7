package segstore.spark;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;

/**
 * The segstore Python workers of this JVM: one warm fork server per Python executable
 * ({@code python -m segstore.spark.worker}) and a pool of connections to its children.
 *
 * <p>The server imports segstore, pyarrow and the format plugins once; each new connection
 * is served by a child forked from it (a few milliseconds, no new interpreter), and a
 * connection whose read ended cleanly goes back to the pool, so later tasks reuse its child.
 * The server exits when this JVM does (it watches its stdin, which only this JVM holds).
 *
 * <p>Thread-safe: tasks of one executor borrow and return connections concurrently.
 */
final class PythonWorkers {
    private static final Map<String, PythonWorkers> BY_EXECUTABLE = new ConcurrentHashMap<>();
    /** Idle connections kept per server; more are closed (their children exit). */
    private static final int MAX_IDLE = Math.max(4, Runtime.getRuntime().availableProcessors() * 2);

    /** segstore.allocator.ARROW_POOL_ENV and ARROW_POOL_CONF (a test keeps them equal). */
    static final String ARROW_POOL_ENV = "JE_ARROW_MALLOC_CONF";
    static final String ARROW_POOL_CONF = "muzzy_decay_ms:-1";
    /** segstore.cli.COMMAND_ENV (a test keeps them equal). */
    static final String BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS";
    static final String BLAS_THREADS = "1";

    private final String executable;
    private final Process process;
    private final Path socket;
    private final ArrayDeque<WorkerConnection> idle = new ArrayDeque<>();

    private PythonWorkers(String executable) throws IOException {
        this.executable = executable;
        List<String> command = new ArrayList<>(List.of(executable, "-m", "segstore.spark.worker"));
        ProcessBuilder builder = new ProcessBuilder(command);
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        // segstore.allocator.ARROW_POOL_CONF, where the environment sets no options of its own:
        // Arrow's jemalloc pool keeps the pages a batch freed for the next one instead of giving
        // them back (a task's consume-queue entries, megabytes, faulted in page by page each time).
        // jemalloc reads it when pyarrow loads, before any of the worker's own code runs.
        builder.environment().putIfAbsent(ARROW_POOL_ENV, ARROW_POOL_CONF);
        // numpy's BLAS on one thread, as the segstore command has it: the worker does no linear
        // algebra, and OpenBLAS's pool, started as numpy loads, spun about 0.1 s of another core's
        // time in each server's start (on an executor, beside the tasks).
        builder.environment().putIfAbsent(BLAS_THREADS_ENV, BLAS_THREADS);
        SparkConf conf = SparkEnv.get() != null ? SparkEnv.get().conf() : null;
        if (conf != null) {
            // what Spark gives its own Python workers on executors
            for (scala.Tuple2<String, String> entry : conf.getAllWithPrefix("spark.executorEnv.")) {
                builder.environment().put(entry._1(), entry._2());
            }
        }
        process = builder.start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8));
        String line = out.readLine();
        if (line == null) {
            int status;
            try {
                status = process.waitFor();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                status = -1;
            }
            throw new IOException("segstore's Python worker (" + executable + " -m segstore.spark.worker) "
                    + "exited with status " + status + " before it was ready; its error is above in the "
                    + "log. The executors' Python must have segstore installed (pip install "
                    + "'segstore[spark]'); spark.pyspark.python or PYSPARK_PYTHON names it");
        }
        JsonNode hello = WorkerConnection.MAPPER.readTree(line);
        socket = Path.of(hello.path("socket").asText());
        Runtime.getRuntime().addShutdownHook(new Thread(process::destroy, "segstore-workers-stop"));
    }

    /** The Python executable of this process's role: the driver's on the driver, else the executors'. */
    static String executable(boolean driver) {
        SparkConf conf = SparkEnv.get() != null ? SparkEnv.get().conf() : null;
        List<String> candidates = new ArrayList<>();
        if (driver) {
            candidates.add(conf == null ? null : conf.get("spark.pyspark.driver.python", null));
            candidates.add(System.getenv("PYSPARK_DRIVER_PYTHON"));
        }
        candidates.add(conf == null ? null : conf.get("spark.pyspark.python", null));
        candidates.add(System.getenv("PYSPARK_PYTHON"));
        for (String candidate : candidates) {
            if (candidate != null && !candidate.isEmpty()) {
                return candidate;
            }
        }
        return "python3";
    }

    /** The workers of {@code executable}, started on first use (and again if the server died). */
    static PythonWorkers of(String executable) {
        return BY_EXECUTABLE.compute(executable, (name, current) -> {
            if (current != null && current.process.isAlive()) {
                return current;
            }
            if (current != null) {
                current.closeIdle();
            }
            try {
                return new PythonWorkers(name);
            } catch (IOException e) {
                throw new SegstoreException("could not start segstore's Python worker " + name + ": "
                        + e.getMessage(), e);
            }
        });
    }

    /**
     * A connection to a worker child: an idle one whose child is still there, or a new one (the server
     * forks its child). An idle child can be gone (the out-of-memory killer, an operator's kill): its
     * connection, whose next request failed ("segstore's Python worker failed: Broken pipe"), is closed
     * and passed over.
     */
    WorkerConnection borrow() throws IOException {
        synchronized (idle) {
            while (!idle.isEmpty()) {
                WorkerConnection connection = idle.pop();
                if (connection.isOpen() && connection.idleAndAlive()) {
                    connection.reused = true;
                    return connection;
                }
                closeQuietly(connection);
            }
        }
        return new WorkerConnection(socket);
    }

    /**
     * A new connection in place of {@code failed}, a reused one whose first exchange failed before any
     * answer came: the check in {@link #borrow} can pass a child the kernel has not yet torn down (a
     * SIGKILL's end of the connection comes a moment after the signal), so the request goes once more,
     * to a new child. Only what may be asked twice is: the reads of the store, and a write's ping.
     */
    WorkerConnection replace(WorkerConnection failed) throws IOException {
        closeQuietly(failed);
        return new WorkerConnection(socket);
    }

    /** Return a connection whose last exchange ended cleanly; it serves the next borrower. */
    void giveBack(WorkerConnection connection) {
        synchronized (idle) {
            if (idle.size() < MAX_IDLE && process.isAlive()) {
                idle.push(connection);
                return;
            }
        }
        closeQuietly(connection);
    }

    /**
     * The driver's requests that only read the store (segstore/spark/bridge.py): asked again of a new
     * child, they answer alike. The writes' (write_begin makes a staging directory, write_commit appends)
     * are not asked twice.
     */
    /** The request that checks a reused connection before a write's (segstore/spark/worker.py {@code _ping}). */
    private static final JsonNode PING = WorkerConnection.MAPPER.createObjectNode()
            .put("op", "ping");

    static final Set<String> READ_REQUESTS = Set.of("schema", "pushdown", "plan", "stream_initial",
            "stream_snapshot", "stream_latest", "stream_plan");

    /**
     * One JSON exchange on a pooled connection (driver calls: schema, pushdown, plan, streams' offsets,
     * writes' begin, commit and abort). A write's request is never asked twice (a commit asked again
     * after its child ended in the middle could append twice): on a reused connection a {@code ping}
     * goes first, and a connection whose ping fails (its child gone while idle) is replaced
     * ({@link #replace}) before the write is sent. A child that ends in the middle of the exchange is
     * named with why (its server's note, {@link #exitOf}: the out-of-memory killer's SIGKILL...). A
     * request of {@link #READ_REQUESTS} is asked once more, of a new child, where its child ended (killed
     * in the middle, or gone while idle); the answer of the second is the user's, or its end is named too.
     */
    JsonNode call(JsonNode request) {
        WorkerConnection connection;
        try {
            connection = borrow();
        } catch (IOException e) {
            throw new SegstoreException("could not reach segstore's Python worker " + executable + ": "
                    + e.getMessage(), e);
        }
        boolean read = READ_REQUESTS.contains(request.path("op").asText(""));
        boolean clean = false;
        try {
            if (!read && connection.reused) {
                try {
                    connection.call(PING);
                } catch (IOException e) {
                    connection = replace(connection);     // a child gone while idle: nothing was asked
                }
            }
            boolean retried = false;
            String before = null;       // why the child asked first ended, where it was asked again
            while (true) {
                try {
                    JsonNode answer = connection.call(request);
                    clean = true;
                    return answer;
                } catch (SegstoreException e) {
                    clean = true;       // an error reply ends the exchange cleanly
                    throw e;
                } catch (IOException e) {
                    long pid = connection.pid();
                    String reason = exitOf(pid);
                    if (!retried && read && (reason != null || connection.reused)) {
                        retried = true;
                        before = reason == null ? null : "child " + pid + " ended (" + reason + ")";
                        connection = replace(connection);
                        continue;
                    }
                    if (reason == null) {
                        throw e;
                    }
                    String said = "segstore's worker child (pid " + pid + ") ended in the middle of the "
                            + "driver's " + request.path("op").asText("") + " request: " + reason;
                    throw new SegstoreException(before == null ? said
                            : said + "; it was asked once more, of a new child, after " + before, e);
                }
            }
        } catch (IOException e) {
            throw new SegstoreException("segstore's Python worker failed: " + e.getMessage(), e);
        } finally {
            if (clean) {
                giveBack(connection);
            } else {
                closeQuietly(connection);
            }
        }
    }

    /**
     * Why the worker child {@code pid} ended, as its server noted it ({@code exit-PID} beside the socket,
     * segstore/spark/worker.py {@code note_exit}), or null: none noted within two seconds (the server
     * reaps its children at least once a second), or it ended cleanly. The note is removed once read.
     */
    String exitOf(long pid) {
        if (pid <= 0) {
            return null;
        }
        Path note = socket.resolveSibling("exit-" + pid);
        long until = System.nanoTime() + 2_000_000_000L;
        while (true) {
            try {
                String reason = java.nio.file.Files.readString(note, StandardCharsets.UTF_8);
                java.nio.file.Files.deleteIfExists(note);
                return reason;
            } catch (java.nio.file.NoSuchFileException e) {
                if (System.nanoTime() > until || !process.isAlive()) {
                    return null;
                }
            } catch (IOException e) {
                return null;
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
        }
    }

    private void closeIdle() {
        synchronized (idle) {
            for (WorkerConnection connection : idle) {
                closeQuietly(connection);
            }
            idle.clear();
        }
    }

    static void closeQuietly(WorkerConnection connection) {
        try {
            connection.close();
        } catch (IOException ignored) {
            // the child exits when it sees the connection gone; nothing else to release
        }
    }
}
