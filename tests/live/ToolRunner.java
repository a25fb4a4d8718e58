import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import org.apache.kafka.common.utils.Exit;

/**
 * Runs Kafka command-line tools (their real main classes) one after another in one warm JVM, so a test can take
 * many captures without paying a JVM start for each.
 *
 * Protocol, one request per stdin line, TAB-separated: OUT_FILE, MAIN_CLASS, ARGS... The tool's stdout goes to
 * OUT_FILE, its stderr to this JVM's stderr. The reply on stdout is one line "exit CODE".
 * Exit.exit()/Exit.halt() of the tools are turned into an exception carrying the exit code.
 */
public final class ToolRunner {
    private static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    /** The code of the first Exit.exit() of the current tool: the one that would have ended its JVM. */
    private static Integer firstExit;

    public static void main(String[] ignored) throws Exception {
        PrintStream reply = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        PrintStream originalOut = System.out;
        Exit.setExitProcedure(ToolRunner::exit);
        Exit.setHaltProcedure(ToolRunner::exit);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\t", -1);
            int code;
            try (PrintStream out = new PrintStream(new FileOutputStream(parts[0]), true, StandardCharsets.UTF_8)) {
                System.setOut(out);
                code = run(parts[1], Arrays.copyOfRange(parts, 2, parts.length));
            } catch (Exception e) {
                e.printStackTrace();
                code = 99;
            } finally {
                System.setOut(originalOut);
            }
            reply.println("exit " + code);
        }
    }

    private static void exit(int code, String message) {
        if (firstExit == null) {
            firstExit = code;
        }
        throw new ExitCalled(code);
    }

    private static int run(String mainClass, String[] args) throws Exception {
        Method main = Class.forName(mainClass).getMethod("main", String[].class);
        firstExit = null;
        try {
            main.invoke(null, (Object) args);
        } catch (InvocationTargetException e) {
            // Some tools catch Throwable around their own Exit.exit(); the first exit code is the real one.
            if (firstExit == null) {
                e.getCause().printStackTrace();
                return 98;
            }
        }
        return firstExit == null ? 0 : firstExit;
    }
}
