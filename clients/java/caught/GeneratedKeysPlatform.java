package caught;

import org.eclipse.persistence.platform.database.PostgreSQLPlatform;

/** EclipseLink's PostgreSQL platform with its generated-keys switch on: IDENTITY keys are
 *  then read from getGeneratedKeys() instead of SELECT lastval(), but EclipseLink 2.7 takes
 *  the first column of what pgjdbc returns for RETURN_GENERATED_KEYS (RETURNING *). */
public class GeneratedKeysPlatform extends PostgreSQLPlatform {
    public GeneratedKeysPlatform() {
        setSupportsReturnGeneratedKeys(true);
    }
}
